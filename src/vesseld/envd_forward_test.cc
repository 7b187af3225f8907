// The API replica's envd forwarder: which node a request goes to, and
// that placement costs a store read per sandbox and time window, not one
// per request, and none for a request whose token does not check.
#include "vesseld/envd_forward.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "store/store.h"

namespace vessel::vesseld {
namespace {

namespace http = boost::beast::http;

class EnvdForwarderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/envd-forward-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto s = store::openSqlite(dir_ + "/vessel.db");
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    ASSERT_TRUE(store_->createTenant("t1", "t1").ok());
    ASSERT_TRUE(
        store_->insertSandbox({"sb-a", "t1", "minimal", store::SandboxState::kRunning}).ok());
    for (auto [name, url] :
         {std::pair{"n1", "http://10.0.0.1:49983"}, std::pair{"n2", "http://10.0.0.2:49983"}}) {
      store::NodeRecord n;
      n.name = name;
      n.advertise_url = url;
      n.envd_url = url;
      ASSERT_TRUE(store_->heartbeatNode(n).ok());
    }
    ASSERT_TRUE(store_->setSandboxNode("sb-a", "n1").ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  http::request_header<> head(const std::string& id, const std::string& token) const {
    http::request_header<> h;
    h.method(http::verb::get);
    h.target("/files?path=/tmp/x");
    h.set("E2b-Sandbox-Id", id);
    h.set("X-Access-Token", token);
    return h;
  }
  std::string hostFor(EnvdForwarder& f, const std::string& id, const std::string& token) const {
    auto h = head(id, token);
    auto up = f.choose(h);
    return up ? up->host : "<none>";
  }

  std::string dir_;
  std::unique_ptr<store::Store> store_;
  e2b::AccessTokens tokens_ = e2b::AccessTokens::withKey(std::string(32, 'k'));
  // Each node's token (cluster/node_tokens.h): a proof is made for one node.
  cluster::NodeTokens nodes_ =
      *cluster::NodeTokens::parse("n1 token-of-n1-0123456789\nn2 token-of-n2-0123456789\n");
};

TEST_F(EnvdForwarderTest, PlacementComesFromMemoryUntilItsTimeOrAStateChangeHere) {
  EnvdForwarder f(*store_, tokens_, nodes_, std::chrono::minutes(1));
  std::string tok = tokens_.forSandbox("sb-a");
  EXPECT_EQ(hostFor(f, "sb-a", tok), "10.0.0.1");
  EXPECT_EQ(f.placementsKept(), 1u);
  // Moved behind its back (another replica): this one keeps what it read,
  // within kPlacementTtl, rather than reading the store again.
  ASSERT_TRUE(store_->setSandboxNode("sb-a", "n2").ok());
  EXPECT_EQ(hostFor(f, "sb-a", tok), "10.0.0.1");
  // A state change made here forgets it: the next request reads again.
  f.forget("sb-a");
  EXPECT_EQ(f.placementsKept(), 0u);
  EXPECT_EQ(hostFor(f, "sb-a", tok), "10.0.0.2");
}

TEST_F(EnvdForwarderTest, AStrangersRequestCostsNoStoreReadAndKeepsNothing) {
  EnvdForwarder f(*store_, tokens_, nodes_, std::chrono::minutes(1));
  // A wrong token, another sandbox's token, an unknown id: answered by the
  // replica itself (no upstream), and nothing is kept for them.
  EXPECT_EQ(hostFor(f, "sb-a", std::string(64, '0')), "<none>");
  EXPECT_EQ(hostFor(f, "sb-a", tokens_.forSandbox("sb-b")), "<none>");
  for (int i = 0; i < 100; ++i) {
    std::string id = "sb-nope-" + std::to_string(i);
    EXPECT_EQ(hostFor(f, id, std::string(64, '1')), "<none>");
  }
  EXPECT_EQ(f.placementsKept(), 0u);
  // An unknown id with its own valid token (the key's holder made it): no
  // node, nothing kept.
  EXPECT_EQ(hostFor(f, "sb-gone", tokens_.forSandbox("sb-gone")), "<none>");
  EXPECT_EQ(f.placementsKept(), 0u);
}

TEST_F(EnvdForwarderTest, AClientsOwnForwardProofIsDroppedAndTheReplicasSet) {
  EnvdForwarder f(*store_, tokens_, nodes_, std::chrono::minutes(1));
  auto h = head("sb-a", tokens_.forSandbox("sb-a"));
  h.set(e2b::AccessTokens::kForwardHeader, "forged");
  auto up = f.choose(h);
  ASSERT_TRUE(up.has_value());
  EXPECT_NE(h[e2b::AccessTokens::kForwardHeader], "forged");
  // Under the token of the sandbox's node, n1, which only n1 accepts.
  auto n1 = e2b::AccessTokens::nodeSide("token-of-n1-0123456789");
  auto n2 = e2b::AccessTokens::nodeSide("token-of-n2-0123456789");
  EXPECT_TRUE(n1.forwarded("sb-a", h[e2b::AccessTokens::kForwardHeader]));
  EXPECT_FALSE(n2.forwarded("sb-a", h[e2b::AccessTokens::kForwardHeader]));
}

// A node this replica holds no token for gets nothing forwarded (it would
// refuse every proof): the replica answers itself.
TEST_F(EnvdForwarderTest, ANodeWithoutATokenIsNotForwardedTo) {
  EnvdForwarder f(*store_, tokens_, *cluster::NodeTokens::parse("n2 token-of-n2-0123456789"),
                  std::chrono::minutes(1));
  EXPECT_EQ(hostFor(f, "sb-a", tokens_.forSandbox("sb-a")), "<none>");
}

}  // namespace
}  // namespace vessel::vesseld
