// Many machines, a taken-over node is contained (issue 24, item 5): what a
// node or the store holds cannot produce a sandbox's envd token, and a
// node's envd listener lets in only what an API replica checked. The
// cluster is cluster_e2e_fixture.h's. Needs root.
#include "cluster/credential_share.h"
#include "cluster_e2e_fixture.h"
#include "e2b/access_token.h"
#include "templates/manifest.h"

namespace vessel::cluster_e2e {
namespace {

namespace bhttp = boost::beast::http;

// One request to `host:port`, on a connection of its own.
bhttp::response<bhttp::string_body> sendTo(const std::string& host, uint16_t port,
                                           bhttp::request<bhttp::string_body> req) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket sock(io);
  boost::system::error_code ec;
  sock.connect({boost::asio::ip::make_address(host), port}, ec);
  bhttp::response<bhttp::string_body> res;
  if (ec) return res;
  req.set(bhttp::field::host, host);
  req.prepare_payload();
  bhttp::write(sock, req, ec);
  boost::beast::flat_buffer buf;
  if (!ec) bhttp::read(sock, buf, res, ec);
  if (ec) res.result(0);
  return res;
}

bhttp::request<bhttp::string_body> stat(const std::string& id, const std::string& token) {
  bhttp::request<bhttp::string_body> r{bhttp::verb::post, "/filesystem.Filesystem/Stat", 11};
  r.set("E2b-Sandbox-Id", id);
  if (!token.empty()) r.set("X-Access-Token", token);
  r.set(bhttp::field::authorization, "Basic cm9vdDo=");  // root
  r.set(bhttp::field::content_type, "application/json");
  r.body() = R"({"path":"/"})";
  return r;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

// A node's credentials (its state directory, the store it is given) hold
// no key an envd token is made with: the store has none, a key the store
// once held makes no valid token, and the node's own envd listener refuses
// even the real token when it arrives without a replica's check. Through a
// replica the token works, and a proof header a client adds is dropped.
TEST_F(ClusterTest, ANodeCannotComputeOrBypassAnotherSandboxsEnvdToken) {
  auto [id, op] = create(0);
  ASSERT_TRUE(waitUntil([&] { return finished(0, op); })) << logs();
  ASSERT_EQ(opState(0, op), "done") << logs();
  auto got = e2b(1, "GET", "/sandboxes/" + id);
  ASSERT_EQ(got.status, 200) << got.body;
  std::string token = testing::str(got.js(), "envdAccessToken");
  ASSERT_EQ(token.size(), 64u);
  int node = -1;
  for (int i = 0; i < kNodes; ++i)
    if (row(id)->node == nodeName(i)) node = i;
  ASSERT_GE(node, 0);

  // The store: no token key (before issue 24 every node read it there).
  auto meta = store_->getMeta("e2b_token_key");
  ASSERT_TRUE(meta.ok());
  if (*meta && !(*meta)->empty()) {
    EXPECT_NE(e2b::AccessTokens::withKey(unhex(**meta)).forSandbox(id), token)
        << "the store's key computes the sandbox's envd token";
  }
  EXPECT_TRUE(!*meta || (*meta)->empty()) << "the store holds an envd token key";
  // Nor does any node's state directory.
  for (int i = 0; i < kNodes; ++i)
    EXPECT_FALSE(
        std::filesystem::exists(dir_->path() + "/node" + std::to_string(i) + "/e2b-token-key"));

  // Straight to the node's envd listener, past the replicas: refused, with
  // the real token, with none, and with a proof made under another secret.
  EXPECT_EQ(sendTo(ip(node), 49983, stat(id, token)).result_int(), 401);
  EXPECT_EQ(sendTo(ip(node), 49983, stat(id, "")).result_int(), 401);
  auto forged = stat(id, "");
  auto other = e2b::AccessTokens::withKey(std::string(32, 'x'));
  other.setForwardSecret("not-the-cluster-secret-0123456789");
  forged.set(e2b::AccessTokens::kForwardHeader, other.forwardProof(id));
  EXPECT_EQ(sendTo(ip(node), 49983, std::move(forged)).result_int(), 401);
  // A token made under the empty key (what a keyless node would compute).
  EXPECT_EQ(
      sendTo(ip(node), 49983, stat(id, e2b::AccessTokens::withKey("").forSandbox(id))).result_int(),
      401);

  // Through either replica: the token works; a wrong one with a client's
  // own proof header does not (the replica drops the header and refuses).
  for (int api = 0; api < kApis; ++api) {
    auto ok = sendTo("127.0.0.1", envd_ports_[api], stat(id, token));
    EXPECT_EQ(ok.result_int(), 200) << ok.body() << logs();
  }
  auto smuggled = stat(id, std::string(64, '0'));
  smuggled.set(e2b::AccessTokens::kForwardHeader, std::string(64, '0'));
  EXPECT_EQ(sendTo("127.0.0.1", envd_ports_[0], std::move(smuggled)).result_int(), 401);
}

bhttp::request<bhttp::string_body> holding(const std::string& id, const std::string& token) {
  bhttp::request<bhttp::string_body> r{bhttp::verb::post, "/node/v1/holding", 11};
  r.set(bhttp::field::authorization, "Bearer " + token);
  r.set(bhttp::field::content_type, "application/json");
  r.body() = R"({"id":")" + id + R"("})";
  return r;
}

// Each node its own token (issue 24, item 5): a taken-over node's token
// opens no other node's API, and an envd forward proof it makes under its
// own token opens no other node's envd. The sandbox's own node's token
// does both (so the refusals are about whose token it is).
TEST_F(ClusterTest, ANodesTokenOpensNoOtherNode) {
  auto [id, op] = create(0);
  ASSERT_TRUE(waitUntil([&] { return finished(0, op); })) << logs();
  ASSERT_EQ(opState(0, op), "done") << logs();
  int node = -1;
  for (int i = 0; i < kNodes; ++i)
    if (row(id)->node == nodeName(i)) node = i;
  ASSERT_GE(node, 0);
  const int other = (node + 1) % kNodes;

  // The node API.
  EXPECT_EQ(sendTo(ip(node), 8091, holding(id, nodeToken(other))).result_int(), 401);
  auto own = sendTo(ip(node), 8091, holding(id, nodeToken(node)));
  EXPECT_EQ(own.result_int(), 200) << own.body();
  EXPECT_NE(own.body().find("running"), std::string::npos) << own.body();

  // The node's envd, with a forward proof made under another node's token.
  auto forged = stat(id, "");
  forged.set(e2b::AccessTokens::kForwardHeader,
             e2b::AccessTokens::proofUnder(nodeToken(other), id));
  EXPECT_EQ(sendTo(ip(node), 49983, std::move(forged)).result_int(), 401);
  auto real = stat(id, "");
  real.set(e2b::AccessTokens::kForwardHeader, e2b::AccessTokens::proofUnder(nodeToken(node), id));
  auto ok = sendTo(ip(node), 49983, std::move(real));
  EXPECT_EQ(ok.result_int(), 200) << ok.body();
  // Nor does any node store its token where another node reads it: the
  // store holds each node's token hash only.
  for (int i = 0; i < kNodes; ++i) {
    auto meta = store_->getMeta("node_token_sha256:" + nodeName(i));
    ASSERT_TRUE(meta.ok());
    ASSERT_TRUE(meta->has_value()) << nodeName(i) << " published no token hash";
    EXPECT_EQ((*meta)->find(nodeToken(i)), std::string::npos);
    EXPECT_EQ((*meta)->size(), 64u);
  }
}

// A taken-over node writes the catalogue (issue 24, item 5): an entry it
// registered itself, or rewrote after the replicas signed it, is copied by
// no other node (they hold the replicas' public key); the entry as the
// replicas signed it is. "evil" fills a node (as "solo" in
// cluster_e2e_test.cc), so the next create of it must copy it elsewhere.
TEST_F(ClusterTest, ANodesOwnCatalogueEntryIsCopiedByNoOtherNode) {
  uint64_t big = 0;
  ASSERT_NO_FATAL_FAILURE(putSoloOnNode0(&big, "evil"));
  ASSERT_TRUE(waitUntil([&] {
    auto t = store_->getTemplate("evil", "");
    return t.ok() && t->has_value();
  })) << logs();
  auto [first, op1] = createOf(0, "evil");
  ASSERT_TRUE(waitUntil([&] { return finished(0, op1); })) << logs();
  ASSERT_EQ(opState(0, op1), "done") << opJson(0, op1) << logs();
  ASSERT_TRUE(waitUntil([&] { return nodeRows()["node0"].memory_free_mib < big; })) << logs();

  auto refusedCreate = [&](const std::string& why_not) {
    auto [id, op] = createOf(1, "evil");
    ASSERT_TRUE(waitUntil([&] { return finished(1, op); })) << logs();
    std::string why = opJson(1, op);
    EXPECT_EQ(opState(1, op), "failed") << why_not << ": " << why;
    EXPECT_NE(why.find("not signed by the API replicas"), std::string::npos) << why;
    std::string node = row(id)->node;
    EXPECT_NE(node, "node0");
    EXPECT_FALSE(std::filesystem::exists(dir_->path() + "/" + node + "-cache/templates/evil"))
        << why_not;
  };
  // Registered by node0 alone: unsigned.
  refusedCreate("an entry a node wrote");
  // Signed, then rewritten by a node (another rootfs checksum): refused.
  signAsReplicas("evil", "v1");
  auto signed_row = store_->getTemplate("evil", "v1");
  ASSERT_TRUE(signed_row.ok() && signed_row->has_value());
  store::TemplateRecord rewritten = **signed_row;
  auto m = templates::parseManifest(rewritten.manifest_json);
  ASSERT_TRUE(m.ok());
  const std::string real = m->files.at(templates::kRootfsFile);
  rewritten.manifest_json.replace(rewritten.manifest_json.find(real), real.size(),
                                  sha256Hex("the node's own rootfs"));
  ASSERT_TRUE(store_->putTemplate(rewritten, true).ok());
  refusedCreate("a signed entry a node rewrote");
  // As the replicas signed it: copied, and it runs.
  ASSERT_TRUE(store_->putTemplate(**signed_row, true).ok());
  auto [ok, op3] = createOf(1, "evil");
  ASSERT_TRUE(waitUntil([&] { return finished(1, op3); })) << logs();
  ASSERT_EQ(opState(1, op3), "done") << opJson(1, op3) << logs();
  EXPECT_NE(row(ok)->node, "node0");
}

// Credentials reach a node only for the sandboxes it runs: the store holds
// each value sealed under the replicas' key (a file no node has), the node
// that runs a sandbox opens what a replica sealed for it (the create needs
// the credential, so it fails unless that node opened it), and neither the
// store nor another node's token opens it. Deleted, its rows go.
TEST_F(ClusterTest, CredentialsReachOnlyTheNodeThatRunsTheSandbox) {
  const std::string secret = "Bearer e2e-secret-0123456789";
  auto put = client(apiUrl(0), key_)
                 .post("/v1/credentials", json::object{{"name", "gh"},
                                                       {"hosts", json::array{"api.github.test"}},
                                                       {"header", "Authorization"},
                                                       {"value", secret}});
  ASSERT_TRUE(put.ok()) << put.error().message() << logs();
  // The other replica reads it too: one key, the same file on each.
  auto listed = client(apiUrl(1), key_).get("/v1/credentials");
  ASSERT_TRUE(listed.ok()) << listed.error().message();
  EXPECT_NE(json::serialize(*listed).find("\"gh\""), std::string::npos);

  auto made = client(apiUrl(1), key_)
                  .post("/v1/sandboxes", json::object{{"network", json::object{{"mode", "none"}}},
                                                      {"credentials", json::array{"gh"}}});
  ASSERT_TRUE(made.ok()) << made.error().message();
  std::string id = testing::str(made->at("sandbox"), "id");
  std::string op = testing::str(made->at("operation"), "id");
  ASSERT_TRUE(waitUntil([&] { return finished(1, op); })) << logs();
  ASSERT_EQ(opState(1, op), "done") << opJson(1, op) << logs();
  int node = -1;
  for (int i = 0; i < kNodes; ++i)
    if (row(id)->node == nodeName(i)) node = i;
  ASSERT_GE(node, 0);

  // The store as its owner reads it: no value without the replicas' key.
  auto stored = store_->getCredential("dev", "gh");
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().code(), Code::kFailedPrecondition);
  auto sealed = store_->sandboxCredential(id, "gh");
  ASSERT_TRUE(sealed.ok() && sealed->has_value()) << logs();
  EXPECT_EQ((*sealed)->find("e2e-secret"), std::string::npos);
  auto tokenOf = [&](int i) {
    std::string t = readFile(tokenFile(i));
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
    return t;
  };
  auto opened =
      cluster::openForNode(cluster::nodeCredentialKey(tokenOf(node)), "dev", id, "gh", **sealed);
  ASSERT_TRUE(opened.ok()) << opened.error().message();
  EXPECT_EQ(opened->value, secret);
  for (int i = 0; i < kNodes; ++i) {
    if (i == node) continue;
    EXPECT_FALSE(
        cluster::openForNode(cluster::nodeCredentialKey(tokenOf(i)), "dev", id, "gh", **sealed)
            .ok())
        << nodeName(i) << " opened another node's sandbox's credential";
    EXPECT_FALSE(
        std::filesystem::exists(dir_->path() + "/node" + std::to_string(i) + "/credential-key"));
  }
  // A credential that does not exist: the node refuses the create.
  auto bad = client(apiUrl(0), key_)
                 .post("/v1/sandboxes", json::object{{"network", json::object{{"mode", "none"}}},
                                                     {"credentials", json::array{"nope"}}});
  if (bad.ok()) {
    std::string bad_op = testing::str(bad->at("operation"), "id");
    ASSERT_TRUE(waitUntil([&] { return finished(0, bad_op); }));
    EXPECT_EQ(opState(0, bad_op), "failed");
    EXPECT_NE(opJson(0, bad_op).find("nope"), std::string::npos) << opJson(0, bad_op);
  } else {
    EXPECT_NE(bad.error().message().find("nope"), std::string::npos) << bad.error().message();
  }

  ASSERT_TRUE(client(apiUrl(0), key_).del("/v1/sandboxes/" + id).ok());
  EXPECT_TRUE(waitUntil([&] {
    auto s = store_->sandboxCredential(id, "gh");
    return s.ok() && !s->has_value();
  })) << logs();
}

}  // namespace
}  // namespace vessel::cluster_e2e
