// Templates between nodes: the catalogue in a real (SQLite) store, a
// source node's TemplateFileServer on a real HTTP listener, and a second
// node's TemplateFetcher copying from it into its own TemplateStore. The
// copy is checked against the catalogue's manifest (a corrupted source is
// refused and nothing is installed), concurrent creates fetch once, and an
// API replica's TemplateStore serves the catalogue without any file.
#include "cluster/template_transfer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <filesystem>
#include <fstream>

#include "base/fd.h"
#include "base/run_blocking.h"
#include "base/sha256.h"
#include "cluster/node_server.h"
#include "cluster/node_tokens.h"
#include "cluster/template_catalogue.h"
#include "http/server.h"
#include "templates/build_spec.h"
#include "templates/naming.h"

namespace vessel::cluster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(TemplateFilePathTest, ParsesThreeNamesAndNothingElse) {
  auto r = parseTemplateFilePath("/node/v1/templates/t-0123456789ab-py/9f3a/rootfs.ext4");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, (TemplateFileRef{"t-0123456789ab-py", "9f3a", "rootfs.ext4"}));
  EXPECT_EQ(templateFilePath(*r), "/node/v1/templates/t-0123456789ab-py/9f3a/rootfs.ext4");
  for (const char* bad :
       {"/node/v1/templates/a/b", "/node/v1/templates/a/b/c/d", "/node/v1/templates/a/../c",
        "/node/v1/templates/a/b/.manifest", "/node/v1/templates//b/c",
        "/node/v1/templates/a/b/c?x=1", "/node/v1/templates/a/b/c/", "/node/v1/create",
        "/node/v1/templates/", "/node/v1/templates/a/b/f%2fg", "/node/v1/templates/a b/v/f"})
    EXPECT_FALSE(parseTemplateFilePath(bad).ok()) << bad;
  EXPECT_FALSE(parseTemplateFilePath("/node/v1/templates/" + std::string(65, 'a') + "/v/f").ok());
}

TEST(TemplateSizesTest, StrictAndMatchedToTheManifest) {
  auto s = templates::parseSizes(R"({"rootfs.ext4":1048576,"memory":0})");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->at("rootfs.ext4"), 1048576u);
  EXPECT_EQ(templates::parseSizes(templates::sizesJson(*s)).value(), *s);
  for (const char* bad : {"[]", R"({"a":-1})", R"({"a":"1"})", R"({"../x":1})", R"({".m":1})",
                          R"({"a":1.5})", R"({"a":1099511627776})", "{", ""})
    EXPECT_FALSE(templates::parseSizes(bad).ok()) << bad;
  templates::Manifest m;
  m.files = {{"rootfs.ext4", "x"}, {"memory", "y"}};
  EXPECT_TRUE(templates::checkSizes(m, *s).ok());
  EXPECT_FALSE(templates::checkSizes(m, {{"rootfs.ext4", 1}}).ok());
  EXPECT_FALSE(templates::checkSizes(m, {{"rootfs.ext4", 1}, {"state", 1}}).ok());
}

TEST(NodeProtocolTemplatesTest, BuildFieldsAndTheManifestRoundTrip) {
  NodeCall c;
  c.tenant = "t1";
  c.template_name = "t-0123456789ab-py";
  c.base = "minimal";
  c.spec = R"({"name":"build","commands":["true"]})";
  auto back = parseNodeCall(serializeNodeCall(c));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->base, "minimal");
  EXPECT_EQ(back->spec, c.spec);
  EXPECT_FALSE(parseNodeCall(R"({"base":1})").ok());
  // A spec is bounded as the node's parseBuildSpec bounds it (a build's
  // copied files travel inline): just past that bound is refused.
  EXPECT_FALSE(
      parseNodeCall(R"({"spec":")" + std::string(templates::kMaxNodeSpecBytes + 1, 'x') + "\"}")
          .ok());
  EXPECT_TRUE(parseNodeCall(R"({"spec":")" + std::string(4 << 20, 'x') + "\"}").ok());
  NodeReply r;
  r.manifest = R"({"name":"x"})";
  auto rb = parseNodeReply(serializeNodeReply(r));
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(rb->manifest, r.manifest);
}

class TemplateTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/template_transfer_test_" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/a");
    fs::create_directories(dir_ + "/b");
    auto s = store::openSqlite(dir_ + "/registry.db");
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    catalogue_ = std::make_unique<StoreCatalogue>(*store_);
    a_ = std::make_unique<templates::TemplateStore>(dir_ + "/a", "fake", "k");
    b_ = std::make_unique<templates::TemplateStore>(dir_ + "/b", "fake", "k");
    // More than one read and one write chunk (1 MiB each), not a multiple.
    std::string rootfs((3 << 20) + 12345, '\0');
    for (size_t i = 0; i < rootfs.size(); ++i) rootfs[i] = static_cast<char>(i * 131 % 251);
    installTemplate(*a_, "solo", rootfs);
    // Node a's token, and the other nodes' as they published them.
    files_ = std::make_unique<TemplateFileServer>(*a_, "tok", peerTokenCheck(*store_, "a"));
    http_ = std::make_unique<http::HttpServer>(io_, nodeServerLimits());
    files_->install(*http_);
    ASSERT_TRUE(http_->listen({"127.0.0.1", 0}).ok());
    store::NodeRecord n;
    n.name = "a";
    n.advertise_url = "http://127.0.0.1:" + std::to_string(http_->port());
    n.templates = {"solo"};
    ASSERT_TRUE(store_->heartbeatNode(n).ok());
    ASSERT_EQ(registerInstalled(*a_, *catalogue_), 1);
    fetcher_ = std::make_unique<TemplateFetcher>(io_, *b_, *catalogue_, *store_,
                                                 FetchOptions{"b", "tok", 15s, 10s});
  }
  void TearDown() override {
    fetcher_.reset();
    if (http_) http_->close();
    files_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  void installTemplate(templates::TemplateStore& st, const std::string& name,
                       const std::string& rootfs) {
    std::string staging = dir_ + "/staging-" + name;
    fs::create_directories(staging);
    templates::Manifest m;
    m.name = name;
    m.version = "v1";
    m.spec_hash = std::string(64, 'a');
    m.qemu_version = "fake";
    m.kernel_sha256 = "k";
    m.cmdline = "quiet";
    m.memory_mib = 64;
    m.created_at = "2026-01-01T00:00:00Z";
    std::map<std::string, std::string> content = {{templates::kRootfsFile, rootfs},
                                                  {templates::kMemoryFile, "RAM"},
                                                  {templates::kStateFile, ""}};
    for (const auto& [f, data] : content) {
      ASSERT_TRUE(writeFileAtomic(staging + "/" + f, data).ok());
      m.files[f] = sha256Hex(data);
    }
    ASSERT_TRUE(st.install(staging, m).ok());
  }
  // Nothing of template `name` in `root`: no version, no staging left.
  static bool nothingOf(const std::string& root, const std::string& name) {
    if (fs::exists(root + "/" + name)) return false;
    for (const auto& e : fs::directory_iterator(root))
      if (e.path().filename().string().rfind(".staging-", 0) == 0) return false;
    return true;
  }

  asio::io_context io_;
  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<StoreCatalogue> catalogue_;
  std::unique_ptr<templates::TemplateStore> a_, b_;
  std::unique_ptr<TemplateFileServer> files_;
  std::unique_ptr<http::HttpServer> http_;
  std::unique_ptr<TemplateFetcher> fetcher_;
};

TEST_F(TemplateTransferTest, ConcurrentCreatesCopyOnceAndTheCopyIsChecked) {
  auto entry = catalogue_->get("solo", "");
  ASSERT_TRUE(entry.ok() && entry->has_value());
  EXPECT_EQ((*entry)->sizes.at(templates::kRootfsFile), (3u << 20) + 12345);
  std::vector<std::optional<Status>> got(3);
  for (auto& g : got)
    asio::co_spawn(
        io_, [&]() -> asio::awaitable<void> { g = co_await fetcher_->ensure("solo"); },
        asio::detached);
  runBlocking(io_, [&]() -> asio::awaitable<bool> {
    asio::steady_timer t(io_);
    while (!got[0] || !got[1] || !got[2]) {
      t.expires_after(10ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    co_return true;
  }());
  for (auto& g : got) EXPECT_TRUE(g->ok()) << g->error().message();
  EXPECT_EQ(fetcher_->fetched(), 1);
  auto t = b_->open("solo");  // verifies every checksum
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(readFile((*t)->path(templates::kRootfsFile), 8 << 20).value(),
            readFile(dir_ + "/a/solo/v1/rootfs.ext4", 8 << 20).value());
  // Present now: nothing is fetched again.
  ASSERT_TRUE(runBlocking(io_, fetcher_->ensure("solo")).ok());
  EXPECT_EQ(fetcher_->fetched(), 1);
  // Not in the catalogue: the caller's open() says what is wrong.
  EXPECT_TRUE(runBlocking(io_, fetcher_->ensure("other")).ok());
}

TEST_F(TemplateTransferTest, ACorruptedSourceIsRefusedAndNothingIsInstalled) {
  // One byte flipped in the source's file after it was registered.
  std::string path = dir_ + "/a/solo/v1/rootfs.ext4";
  ::chmod(path.c_str(), 0644);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2 << 20);
    f.put('\x7f');
  }
  auto s = runBlocking(io_, fetcher_->ensure("solo"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kFailedPrecondition);
  EXPECT_NE(s.error().message().find("rootfs.ext4"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("the catalogue's manifest says"), std::string::npos)
      << s.error().message();
  EXPECT_NE(s.error().message().find("node a"), std::string::npos) << s.error().message();
  EXPECT_TRUE(nothingOf(dir_ + "/b", "solo"));
  EXPECT_EQ(fetcher_->fetched(), 0);
}

TEST_F(TemplateTransferTest, AWrongTokenGetsNothing) {
  TemplateFetcher wrong(io_, *b_, *catalogue_, *store_, FetchOptions{"b", "nope", 15s, 10s});
  auto s = runBlocking(io_, wrong.ensure("solo"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kUnauthenticated) << s.error().message();
  EXPECT_TRUE(nothingOf(dir_ + "/b", "solo"));
}

// Per-node tokens: node b presents its own token, which a does not hold;
// a lets it copy only once b's token hash is published (in b's name: a
// hash a node publishes under a's own name does not count).
TEST_F(TemplateTransferTest, ANodesOwnTokenCopiesOnceItsHashIsPublished) {
  const std::string b_token = "token-of-node-b-0123456789";
  TemplateFetcher as_b(io_, *b_, *catalogue_, *store_, FetchOptions{"b", b_token, 15s, 10s});
  ASSERT_TRUE(store_->setMeta(nodeTokenMetaKey("a"), nodeTokenHash(b_token)).ok());
  auto refused = runBlocking(io_, as_b.ensure("solo"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kUnauthenticated) << refused.error().message();
  EXPECT_TRUE(nothingOf(dir_ + "/b", "solo"));
  store::NodeRecord n;
  n.name = "b";
  n.advertise_url = "http://127.0.0.1:1";
  ASSERT_TRUE(store_->heartbeatNode(n).ok());
  ASSERT_TRUE(store_->setMeta(nodeTokenMetaKey("b"), nodeTokenHash(b_token)).ok());
  auto s = runBlocking(io_, as_b.ensure("solo"));
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(as_b.fetched(), 1);
}

// With the replicas' public key a node copies only a signed entry: "solo"
// as node a registered it is refused, nothing installed; signed, copied.
TEST_F(TemplateTransferTest, OnlyASignedEntryIsCopied) {
  auto signer = *CatalogueSigner::fromSeed(std::string(32, '\x33'));
  auto verifier = *CatalogueVerifier::fromHex(signer.publicKeyHex());
  FetchOptions o{"b", "tok", 15s, 10s};
  o.verifier = &verifier;
  TemplateFetcher checked(io_, *b_, *catalogue_, *store_, o);
  auto refused = runBlocking(io_, checked.ensure("solo"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kFailedPrecondition) << refused.error().message();
  EXPECT_NE(refused.error().message().find("not signed"), std::string::npos);
  EXPECT_TRUE(nothingOf(dir_ + "/b", "solo"));
  auto row = store_->getTemplate("solo", "v1");
  ASSERT_TRUE(row.ok() && row->has_value());
  ASSERT_TRUE(signAnswered(*store_, signer, "", "solo", "v1", (*row)->manifest_json).ok());
  auto s = runBlocking(io_, checked.ensure("solo"));
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(checked.fetched(), 1);
}

// A heartbeat is up to 2 s behind a build: a live node that does not list
// the template yet is still asked.
TEST_F(TemplateTransferTest, ASourceWhoseHeartbeatLagsIsStillAsked) {
  store::NodeRecord n = (*store_->listNodes())[0];
  n.templates.clear();
  ASSERT_TRUE(store_->heartbeatNode(n).ok());
  auto s = runBlocking(io_, fetcher_->ensure("solo"));
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_TRUE(b_->open("solo").ok());
}

TEST_F(TemplateTransferTest, NoLiveSourceIsAClearError) {
  ASSERT_TRUE(*store_->markNodeLost("a", store::nowMs() + 1000));
  auto s = runBlocking(io_, fetcher_->ensure("solo"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("no live node has it"), std::string::npos)
      << s.error().message();
}

TEST_F(TemplateTransferTest, AnApiReplicasStoreServesTheCatalogue) {
  const std::string mine = templates::tenantTemplateName("t1", "mine");
  installTemplate(*a_, mine, std::string(100, 'x'));
  ASSERT_EQ(registerInstalled(*a_, *catalogue_), 2);
  templates::TemplateStore replica("", "", "");
  replica.useCatalogue(catalogue_.get());
  auto all = replica.list();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(replica.has("solo"));
  EXPECT_TRUE(replica.has(mine));
  EXPECT_FALSE(replica.has("other"));
  auto t = replica.open("solo");
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ((*t)->manifest.memory_mib, 64u);
  EXPECT_EQ((*t)->baseDiskMib(), 4u);  // 3 MiB and a bit, rounded up
  EXPECT_EQ(replica.open("other").error().code(), Code::kNotFound);
  EXPECT_EQ(replica.allocatedMib("solo"), 4u);
  EXPECT_EQ(replica.allocatedMib(templates::tenantTemplateName("t1", "")), 1u);
  EXPECT_EQ(replica.allocatedMib(templates::tenantTemplateName("t2", "")), 0u);
  // A deletion is the catalogue's; the node drops its files later.
  ASSERT_TRUE(replica.remove(mine, "v1").ok());
  EXPECT_FALSE(replica.has(mine));
  EXPECT_EQ(replica.list().size(), 1u);
  EXPECT_TRUE(fs::exists(dir_ + "/a/" + mine + "/v1"));
  auto gone = catalogue_->deleted();
  ASSERT_TRUE(gone.ok());
  ASSERT_EQ(gone->size(), 1u);
  EXPECT_EQ((*gone)[0].first, mine);
  // A node registering its files again does not bring a tenant's back.
  EXPECT_EQ(registerInstalled(*a_, *catalogue_), 2);
  EXPECT_FALSE(replica.has(mine));
}

}  // namespace
}  // namespace vessel::cluster
