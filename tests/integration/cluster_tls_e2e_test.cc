// Many machines with TLS on every listener (issue 25 item 4): the nodes'
// node API, data plane and envd listener serve certificates the cluster's
// CA signed, off loopback and without --allow-plain-http; the API
// replicas reach the node API and forward envd over TLS, verifying each
// node with --node-ca-file, and nodes copy templates from each other the
// same way. One node's certificate was signed by another CA (a machine
// that is not the operator's, on the nodes' network, registered with a
// stolen token): no replica sends it a call, so nothing is placed there.
// The cluster is cluster_e2e_fixture.h's. Needs root.
#include "cluster_e2e_fixture.h"
#include "http/testing/test_pki.h"

namespace vessel::cluster_e2e {
namespace {

namespace bhttp = boost::beast::http;

constexpr int kImpostor = 2;  // the node whose certificate the wrong CA signed

class ClusterTlsTest : public ClusterTest {
 protected:
  void prepare() override {
    for (int i = 0; i < kNodes; ++i) {
      // One CA for the cluster; the impostor's own CA for node 2. Each
      // leaf names its node's address.
      std::string d = dir_->path() + "/pki" + std::to_string(i);
      std::string ca_name = i == kImpostor ? "impostor-ca" : "cluster-ca";
      ASSERT_TRUE(http::testing::makeTestPki(d, ca_name, nodeName(i), "IP:" + ip(i), &pki_[i]));
    }
    // Nodes 0 and 1 signed by one CA: re-sign node 1's leaf with node 0's.
    std::string d1 = dir_->path() + "/pki1";
    std::string cmd = "cd '" + d1 + "' && openssl x509 -req -in leaf.csr -CA '" + pki_[0].ca +
                      "' -CAkey '" + dir_->path() +
                      "/pki0/ca.key' -CAcreateserial -days 2 -extfile ext.cnf -out leaf.crt "
                      "2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    pki_[1].ca = pki_[0].ca;
    cluster_ca_ = pki_[0].ca;
  }
  std::vector<std::string> nodeFlags(int i) const override {
    return {"--tls-cert=" + pki_[i].cert, "--tls-key=" + pki_[i].key,
            "--node-ca-file=" + cluster_ca_};
  }
  std::vector<std::string> apiFlags(int) const override {
    return {"--node-ca-file=" + cluster_ca_};
  }
  client::Client nodeClient(int i) const override {
    client::ClientOptions o;
    o.url = "https://" + ip(i) + ":8091";
    o.ca_file = pki_[i].ca;
    o.timeout = 20s;
    return client::Client(o);
  }
  std::string apiLogs() const {
    return readFile(dir_->path() + "/api0.log") + readFile(dir_->path() + "/api1.log");
  }

  http::testing::TestPki pki_[kNodes];
  std::string cluster_ca_;
};

bhttp::request<bhttp::string_body> stat(const std::string& id, const std::string& token) {
  bhttp::request<bhttp::string_body> r{bhttp::verb::post, "/filesystem.Filesystem/Stat", 11};
  r.set("E2b-Sandbox-Id", id);
  r.set("X-Access-Token", token);
  r.set(bhttp::field::host, "127.0.0.1");
  r.set(bhttp::field::authorization, "Basic cm9vdDo=");  // root
  r.set(bhttp::field::content_type, "application/json");
  r.body() = R"({"path":"/"})";
  r.prepare_payload();
  return r;
}

// Long because the cluster is started once (slowly) for all its checks.
TEST_F(ClusterTlsTest, ReplicasReachNodesOverTlsAndRefuseAnotherCasNode) {
  // The node listeners speak TLS only, advertised as https://.
  auto rows = nodeRows();
  ASSERT_EQ(rows.size(), static_cast<size_t>(kNodes));
  for (int i = 0; i < kNodes; ++i) {
    EXPECT_EQ(rows[nodeName(i)].advertise_url, "https://" + ip(i) + ":8091");
    EXPECT_EQ(rows[nodeName(i)].envd_url, "https://" + ip(i) + ":49983");
    EXPECT_EQ(rows[nodeName(i)].data_url, "https://" + ip(i) + ":8081");
    EXPECT_FALSE(client("http://" + ip(i) + ":8091", "").get("/readyz").ok()) << "plain to " << i;
  }

  // Creates: spread over every node the replica trusts; the impostor is
  // tried once placement ranks it first (it is live and has room) and is
  // refused at the handshake. Which create reaches it depends on each
  // replica's ranking, so creates go on (at most 8) until one has.
  std::vector<std::string> ids;
  for (int n = 0;
       n < 8 && (n < 4 || apiLogs().find("certificate verify failed") == std::string::npos); ++n) {
    auto [id, op] = create(n % kApis);
    ASSERT_TRUE(waitUntil([&] { return finished(n % kApis, op); })) << logs();
    ASSERT_EQ(opState(n % kApis, op), "done") << opJson(n % kApis, op) << logs();
    ids.push_back(id);
  }
  std::set<std::string> used;
  for (const auto& id : ids) used.insert(row(id)->node);
  EXPECT_EQ(used, (std::set<std::string>{nodeName(0), nodeName(1)})) << logs();
  EXPECT_NE(apiLogs().find("certificate verify failed"), std::string::npos) << apiLogs();

  // The data plane a session names is the node's, over TLS.
  auto s = client(apiUrl(0), key_).post("/v1/sandboxes/" + ids[0] + "/sessions", json::object{});
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(testing::str(*s, "data_url").rfind("https://", 0), 0u) << json::serialize(*s);

  // envd through each replica (plain on its loopback) reaches the node
  // over TLS: E2B's Stat answered by the sandbox's agent.
  for (int api = 0; api < kApis; ++api) {
    for (const auto& id : ids) {
      auto got = e2b(api, "GET", "/sandboxes/" + id);
      ASSERT_EQ(got.status, 200) << got.body;
      std::string token = testing::str(got.js(), "envdAccessToken");
      boost::asio::io_context io;
      boost::asio::ip::tcp::socket sock(io);
      sock.connect({boost::asio::ip::make_address("127.0.0.1"), envd_ports_[api]});
      auto req = stat(id, token);
      bhttp::write(sock, req);
      boost::beast::flat_buffer buf;
      bhttp::response<bhttp::string_body> res;
      boost::system::error_code ec;
      bhttp::read(sock, buf, res, ec);
      ASSERT_FALSE(ec) << ec.message() << logs();
      EXPECT_EQ(res.result_int(), 200u) << res.body() << logs();
      EXPECT_NE(res.body().find("\"entry\""), std::string::npos) << res.body();
    }
  }
}

// A template on one node is copied to the node the next create is placed
// on over TLS, the source verified with the node's --node-ca-file.
TEST_F(ClusterTlsTest, TemplatesAreCopiedBetweenNodesOverTls) {
  uint64_t big = 0;
  ASSERT_NO_FATAL_FAILURE(putSoloOnNode0(&big));
  const std::string cache0 = dir_->path() + "/node0-cache/templates";
  ASSERT_TRUE(waitUntil([&] {
    auto l = client(apiUrl(0), key_).get("/v1/templates");
    return l.ok() && json::serialize(*l).find("\"solo\"") != std::string::npos;
  })) << logs();
  // Put on node0 by hand, not made through a replica: the nodes copy it
  // only once it is signed as the replicas sign (catalogue_signature.h).
  ASSERT_NO_FATAL_FAILURE(signAsReplicas("solo", "v1"));
  auto [first, op1] = createOf(0, "solo");
  ASSERT_TRUE(waitUntil([&] { return finished(0, op1); })) << logs();
  ASSERT_EQ(opState(0, op1), "done") << opJson(0, op1) << logs();
  ASSERT_EQ(row(first)->node, nodeName(0));
  ASSERT_TRUE(waitUntil([&] { return nodeRows()[nodeName(0)].memory_free_mib < big; })) << logs();

  auto [second, op2] = createOf(0, "solo");
  ASSERT_TRUE(waitUntil([&] { return finished(0, op2); })) << logs();
  ASSERT_EQ(opState(0, op2), "done") << opJson(0, op2) << logs();
  ASSERT_EQ(row(second)->node, nodeName(1)) << "the impostor is never placed on";
  std::string node1 = readFile(dir_->path() + "/node1.log");
  EXPECT_NE(node1.find("copied from node node0 and checked"), std::string::npos) << node1;
  const std::string cache1 = dir_->path() + "/node1-cache/templates";
  for (const char* f : {templates::kRootfsFile, templates::kMemoryFile, templates::kStateFile})
    EXPECT_EQ(sha256File(cache1 + "/solo/v1/" + f).value_or("a"),
              sha256File(cache0 + "/solo/v1/" + f).value_or("b"))
        << f;
}

}  // namespace
}  // namespace vessel::cluster_e2e
