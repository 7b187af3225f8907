// An API replica's ClusterNode over real node API servers (NodeServer on
// real HTTP listeners) in front of fake nodes, with a real SQLite store as
// the registry: placement, routing to the recorded node, authentication,
// and a node that stops heartbeating (its call in flight fails at once,
// its sandboxes are reported lost, creates go to the other node).
#include "cluster/cluster_node.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "base/run_blocking.h"
#include "cluster/credential_share.h"
#include "cluster/node_server.h"
#include "http/server.h"
#include "ops/testing/fake_node.h"

namespace vessel::cluster {
namespace {

using namespace std::chrono_literals;

store::NodeRecord rec(const std::string& name, uint64_t free, std::vector<std::string> templates,
                      int64_t hb, bool lost = false) {
  store::NodeRecord n;
  n.name = name;
  n.memory_mib = 8192;
  n.memory_free_mib = free;
  n.templates = std::move(templates);
  n.heartbeat_ms = hb;
  n.lost = lost;
  return n;
}

TEST(RankNodesTest, TemplateThenFreeMemoryAndOnlyLiveNodes) {
  const int64_t now = 1'000'000;
  std::vector<store::NodeRecord> nodes = {
      rec("a", 4000, {"minimal"}, now - 1000),
      rec("b", 6000, {}, now - 1000),
      rec("c", 5000, {"minimal"}, now - 1000),
      rec("d", 9000, {"minimal"}, now - 60'000),      // silent too long
      rec("e", 9000, {"minimal"}, now - 1000, true),  // marked lost
      rec("f", 100, {"minimal"}, now - 1000),         // no room
  };
  auto order = rankNodes(nodes, "minimal", 256, now, 15s, {});
  EXPECT_EQ(order, (std::vector<std::string>{"c", "a", "b", "f"}));
  // Memory placed since the last heartbeat counts.
  order = rankNodes(nodes, "minimal", 256, now, 15s, {{"c", 2000}});
  EXPECT_EQ(order, (std::vector<std::string>{"a", "c", "b", "f"}));
  EXPECT_TRUE(rankNodes({}, "minimal", 256, now, 15s, {}).empty());
}

class ClusterNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/cluster_node_test_" + std::to_string(::getpid()) + ".db";
    auto s = store::openSqlite(path_, &clock_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    ASSERT_TRUE(store_->createTenant("t1", "one").ok());
    for (int i = 0; i < 2; ++i) {
      fakes_.push_back(std::make_unique<ops::testing::FakeNode>(io_));
      servers_.push_back(std::make_unique<NodeServer>(*fakes_.back(), token(i)));
      http_.push_back(std::make_unique<http::HttpServer>(io_, nodeServerLimits()));
      servers_.back()->install(*http_.back());
      ASSERT_TRUE(http_.back()->listen({"127.0.0.1", 0}).ok());
      heartbeat(i, store::nowMs());
    }
    ClusterOptions o;
    // Per-node tokens (node_tokens.h): each node holds only its own.
    auto tokens = NodeTokens::parse("n0 " + token(0) + "\nn1 " + token(1) + "\n");
    ASSERT_TRUE(tokens.ok()) << tokens.error().message();
    o.tokens = *tokens;
    o.lost_after = 10s;
    cluster_ = std::make_unique<ClusterNode>(io_, *store_, o);
    cluster_->onLost([this](const std::string&, const std::string& id, const std::string& why) {
      lost_.emplace_back(id, why);
    });
  }
  void TearDown() override {
    cluster_.reset();
    for (auto& h : http_) h->close();
    store_.reset();
    for (const char* sfx : {"", "-wal", "-shm"}) ::unlink((path_ + sfx).c_str());
  }
  void heartbeat(int i, int64_t at_ms) {
    clock_.set(at_ms);
    store::NodeRecord n = rec(name(i), 4096, {"minimal"}, 0);
    n.advertise_url = "http://127.0.0.1:" + std::to_string(http_[i]->port());
    ASSERT_TRUE(store_->heartbeatNode(n).ok());
  }
  static std::string name(int i) { return "n" + std::to_string(i); }
  static std::string token(int i) { return "token-of-node-" + std::to_string(i) + "-0123456789"; }
  Status create(const std::string& id) {
    store::SandboxRecord sb{id, "t1", "minimal", store::SandboxState::kCreating};
    if (auto s = store_->insertSandbox(sb); !s.ok()) return s;
    ops::NodeCreate c;
    c.id = id;
    c.tenant = "t1";
    c.template_name = "minimal";
    c.memory_mib = 256;
    return runBlocking(io_, cluster_->create(c));
  }

  asio::io_context io_;
  FakeWallClock clock_;
  std::string path_;
  std::unique_ptr<store::Store> store_;
  std::vector<std::unique_ptr<ops::testing::FakeNode>> fakes_;
  std::vector<std::unique_ptr<NodeServer>> servers_;
  std::vector<std::unique_ptr<http::HttpServer>> http_;
  std::unique_ptr<ClusterNode> cluster_;
  std::vector<std::pair<std::string, std::string>> lost_;
};

TEST_F(ClusterNodeTest, CreatesSpreadAndCallsGoToTheSandboxsNode) {
  for (int i = 0; i < 4; ++i) {
    auto s = create("sb-" + std::to_string(i));
    ASSERT_TRUE(s.ok()) << s.error().message();
  }
  EXPECT_EQ(fakes_[0]->count("create"), 2);
  EXPECT_EQ(fakes_[1]->count("create"), 2);
  auto where = store_->sandboxNode("sb-0");
  ASSERT_TRUE(where.ok());
  int i = *where == "n0" ? 0 : 1;
  EXPECT_EQ(fakes_[i]->held["sb-0"], ops::Holding::kRunning);
  EXPECT_EQ(cluster_->holding("sb-0"), ops::Holding::kRunning);
  ASSERT_TRUE(runBlocking(io_, cluster_->pause("sb-0", true)).ok());
  EXPECT_EQ(fakes_[i]->count("pause sb-0"), 1);
  EXPECT_EQ(fakes_[1 - i]->count("pause"), 0);
  EXPECT_EQ(cluster_->holding("sb-0"), ops::Holding::kPaused);
  // A pause that keeps only the disk says so over the node API.
  ASSERT_TRUE(runBlocking(io_, cluster_->resume("t1", "sb-0")).ok());
  ASSERT_TRUE(runBlocking(io_, cluster_->pause("sb-0", false)).ok());
  EXPECT_EQ(fakes_[i]->count("pause-disk sb-0"), 1);
  EXPECT_EQ(cluster_->holding("sb-0"), ops::Holding::kPaused);
  auto adopted = runBlocking(io_, cluster_->adopt("t1", "sb-0"));
  ASSERT_TRUE(adopted.ok()) << adopted.error().message();
  EXPECT_EQ(*adopted, ops::Holding::kPaused);
  ASSERT_TRUE(runBlocking(io_, cluster_->destroy("sb-0")).ok());
  EXPECT_EQ(fakes_[i]->count("destroy sb-0"), 1);
  EXPECT_EQ(fakes_[i]->held.count("sb-0"), 0u);
  // A failure on the node comes back as that failure.
  fakes_[0]->fail.insert("sb-9");
  fakes_[1]->fail.insert("sb-9");
  EXPECT_FALSE(create("sb-9").ok());
}

// A heartbeat taken while a create runs on a node does not count that
// create yet: the next create of the burst goes to the other node. (A
// heartbeat once cleared every placement, and a burst doubled up.)
TEST_F(ClusterNodeTest, AHeartbeatDuringACreateDoesNotClearItsPlacement) {
  fakes_[0]->hang.insert("sb-slow");  // ranked first: equal nodes, then by name
  ASSERT_TRUE(
      store_->insertSandbox({"sb-slow", "t1", "minimal", store::SandboxState::kCreating}).ok());
  std::optional<Status> slow;
  ops::NodeCreate c{"sb-slow", "t1", "minimal"};
  c.memory_mib = 256;
  asio::co_spawn(
      io_, [&]() -> asio::awaitable<void> { slow = co_await cluster_->create(c); }, asio::detached);
  while (!fakes_[0]->hanging("sb-slow")) io_.run_one_for(20ms);
  // Both nodes heartbeat; n0's does not hold sb-slow yet.
  heartbeat(0, store::nowMs() + 1000);
  heartbeat(1, store::nowMs() + 1000);
  ASSERT_TRUE(create("sb-next").ok());
  EXPECT_EQ(*store_->sandboxNode("sb-next"), "n1");
  EXPECT_EQ(fakes_[0]->count("create"), 1);
  cluster_->abort("sb-slow");
  while (!slow) io_.run_one_for(20ms);
}

// Changing a sandbox's network and measuring its usage go to the node that
// runs it, which answers what it stored and measured; its refusal comes
// back as that refusal.
TEST_F(ClusterNodeTest, NetworkChangesAndUsageGoToTheSandboxsNode) {
  ASSERT_TRUE(create("sb-n").ok());
  int i = *store_->sandboxNode("sb-n") == "n0" ? 0 : 1;
  ops::NetworkSpec spec{"allowlist", {"pypi.org:443"}, {}, {}};
  auto set = runBlocking(io_, cluster_->updateNetwork("t1", "sb-n", spec));
  ASSERT_TRUE(set.ok()) << set.error().message();
  EXPECT_EQ(set->mode, "allowlist");
  EXPECT_EQ(set->allow, spec.allow);
  EXPECT_EQ(fakes_[i]->count("update-network sb-n allowlist"), 1);
  EXPECT_EQ(fakes_[1 - i]->count("update-network"), 0);
  spec.mode = "bogus";  // the fake node refuses it
  auto refused = runBlocking(io_, cluster_->updateNetwork("t1", "sb-n", spec));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kInvalidArgument) << refused.error().message();
  fakes_[i]->fake_usage.mem_used_bytes = 77u << 20;
  auto u = runBlocking(io_, cluster_->usage("sb-n"));
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_EQ(u->mem_used_bytes, 77u << 20);
  EXPECT_DOUBLE_EQ(u->cpu_used_pct, fakes_[i]->fake_usage.cpu_used_pct);
  EXPECT_EQ(fakes_[i]->count("usage sb-n"), 1);
  ASSERT_TRUE(runBlocking(io_, cluster_->pause("sb-n", true)).ok());
  auto none = runBlocking(io_, cluster_->usage("sb-n"));  // no VM while paused
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), Code::kFailedPrecondition);
}

TEST_F(ClusterNodeTest, TheNodeApiRefusesAWrongToken) {
  RemoteNode wrong(io_, "n0", "http://127.0.0.1:" + std::to_string(http_[0]->port()), "nope");
  NodeCall c;
  c.id = "sb-x";
  auto r = runBlocking(io_, wrong.call("holding", c, 5s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnauthenticated) << r.error().message();
  EXPECT_TRUE(fakes_[0]->calls.empty());
}

// A node's token opens that node only: n1's token, held by a taken-over
// n1, gets nothing from n0 (issue 24, item 5).
TEST_F(ClusterNodeTest, ANodesTokenOpensNoOtherNode) {
  RemoteNode as_n1(io_, "n0", "http://127.0.0.1:" + std::to_string(http_[0]->port()), token(1));
  NodeCall c;
  c.id = "sb-x";
  auto r = runBlocking(io_, as_n1.call("holding", c, 5s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnauthenticated) << r.error().message();
  EXPECT_TRUE(fakes_[0]->calls.empty());
  RemoteNode own(io_, "n0", "http://127.0.0.1:" + std::to_string(http_[0]->port()), token(0));
  auto ok = runBlocking(io_, own.call("holding", c, 5s));
  ASSERT_TRUE(ok.ok()) << ok.error().message();
}

// A node the replica has no token for is not placed on (its calls would
// all be refused): every create goes to the node it knows.
TEST_F(ClusterNodeTest, ANodeWithoutATokenGetsNoSandboxes) {
  ClusterOptions o;
  auto only_n1 = NodeTokens::parse("n1 " + token(1) + "\n");
  ASSERT_TRUE(only_n1.ok());
  o.tokens = *only_n1;
  o.lost_after = 10s;
  cluster_ = std::make_unique<ClusterNode>(io_, *store_, o);
  for (int i = 0; i < 3; ++i) {
    auto s = create("sb-t" + std::to_string(i));
    ASSERT_TRUE(s.ok()) << s.error().message();
    EXPECT_EQ(*store_->sandboxNode("sb-t" + std::to_string(i)), "n1");
  }
  EXPECT_EQ(fakes_[0]->count("create"), 0);
  EXPECT_EQ(fakes_[1]->count("create"), 3);
}

TEST_F(ClusterNodeTest, ASilentNodeIsLostItsCallsFailAndCreatesGoElsewhere) {
  ASSERT_TRUE(create("sb-a").ok());
  ASSERT_TRUE(create("sb-b").ok());
  int on1 = *store_->sandboxNode("sb-a") == "n1" ? 0 : 1;  // which of the two is on n1
  std::string victim = on1 == 0 ? "sb-a" : "sb-b";
  // n1's next create hangs; it stops heartbeating meanwhile.
  fakes_[1]->hang.insert("sb-h");
  ASSERT_TRUE(
      store_->insertSandbox({"sb-h", "t1", "minimal", store::SandboxState::kCreating}).ok());
  ASSERT_TRUE(store_->setSandboxNode("sb-h", "n1").ok());
  std::optional<Status> hung;
  ops::NodeCreate c{"sb-h", "t1", "minimal"};
  c.memory_mib = 256;
  // Placed on n1 by making n0 look full for this one create.
  store::NodeRecord full = rec("n0", 0, {}, 0);
  full.advertise_url = "http://127.0.0.1:" + std::to_string(http_[0]->port());
  clock_.set(store::nowMs());
  ASSERT_TRUE(store_->heartbeatNode(full).ok());
  asio::co_spawn(
      io_, [&]() -> asio::awaitable<void> { hung = co_await cluster_->create(c); }, asio::detached);
  while (!fakes_[1]->hanging("sb-h")) io_.run_one_for(20ms);
  EXPECT_FALSE(hung.has_value());
  heartbeat(0, store::nowMs());
  heartbeat(1, store::nowMs() - 60'000);  // its last heartbeat, a minute ago
  auto marked = cluster_->sweepOnce();
  EXPECT_EQ(marked, std::vector<std::string>{"n1"});
  while (!hung) io_.run_one_for(20ms);
  ASSERT_FALSE(hung->ok());
  EXPECT_NE(hung->error().message().find("node n1 lost"), std::string::npos)
      << hung->error().message();
  // Its live sandboxes (sb-h is creating, the other running) are lost.
  std::set<std::string> ids;
  for (const auto& [id, why] : lost_) {
    ids.insert(id);
    EXPECT_EQ(why, "node n1 lost");
  }
  EXPECT_EQ(ids, (std::set<std::string>{victim, "sb-h"}));
  EXPECT_TRUE(cluster_->sweepOnce().empty());  // once
  // Creates go to n0; calls for sandboxes on n1 fail without waiting.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(create("sb-n" + std::to_string(i)).ok());
  EXPECT_EQ(fakes_[1]->count("create"), 2);  // sb-? before, and sb-h
  auto p = runBlocking(io_, cluster_->pause(victim, true));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code(), Code::kUnavailable);
  // Deleting a sandbox of a lost node succeeds here: the node destroys
  // it when it returns, since the store no longer wants it.
  EXPECT_TRUE(runBlocking(io_, cluster_->destroy(victim)).ok());
  // It heartbeats again: it is back.
  heartbeat(1, store::nowMs());
  EXPECT_FALSE((*store_->listNodes())[1].lost);
}

// Issue 24: a sandbox's credentials reach only the node that runs it,
// sealed under a key from that node's token and bound to the sandbox; a
// change reseals them, a fork copy gets its own, a delete removes them.
TEST_F(ClusterNodeTest, CredentialsAreSealedForTheSandboxsNodeAlone) {
  ASSERT_TRUE(store_->useCredentialKey(std::string(32, 'k')).ok());
  store::CredentialRecord gh{"t1", "gh", {"api.github.test"}, "Authorization", "Bearer one", 1};
  ASSERT_TRUE(store_->putCredential(gh).ok());
  ClusterOptions o;
  o.tokens = *NodeTokens::parse("n0 " + token(0) + "\nn1 " + token(1) + "\n");
  o.lost_after = 10s;
  // What the node stored (a fake node stores nothing: the test does).
  o.network_of = [this](const std::string& id) -> Result<ops::NetworkSpec> {
    VESSEL_ASSIGN_OR_RETURN(auto n, store_->getSandboxNetwork(id));
    return n.value_or(ops::NetworkSpec{"none", {}, {}, {}, {}});
  };
  ClusterNode cluster(io_, *store_, o);
  ops::NetworkSpec net{"allowlist", {"api.github.test"}, {"gh", "missing"}, {}, {}};
  ASSERT_TRUE(cluster.prepareNetwork("t1", "sb-c", net).ok());
  ASSERT_TRUE(store_->insertSandbox({"sb-c", "t1", "minimal", store::SandboxState::kRunning}).ok());
  ops::NodeCreate c;
  c.id = "sb-c";
  c.tenant = "t1";
  c.template_name = "minimal";
  c.memory_mib = 256;
  ASSERT_TRUE(runBlocking(io_, cluster.create(c)).ok());
  ASSERT_TRUE(store_->setSandboxNetwork("sb-c", net).ok());
  int i = store_->sandboxNode("sb-c").value_or("") == "n0" ? 0 : 1;
  auto open = [&](int node, const std::string& sb) -> Result<store::CredentialRecord> {
    auto sealed = store_->sandboxCredential(sb, "gh");
    if (!sealed.ok()) return sealed.error();
    if (!*sealed) return Error(Code::kNotFound, "no row for " + sb);
    return openForNode(nodeCredentialKey(token(node)), "t1", sb, "gh", **sealed);
  };
  auto mine = open(i, "sb-c");
  ASSERT_TRUE(mine.ok()) << mine.error().message();
  EXPECT_EQ(mine->value, "Bearer one");
  EXPECT_EQ(mine->hosts, gh.hosts);
  auto sealed = store_->sandboxCredential("sb-c", "gh");
  EXPECT_EQ(sealed->value_or("").find("Bearer"), std::string::npos);
  EXPECT_EQ(open(1 - i, "sb-c").error().code(), Code::kPermissionDenied);  // the other node
  EXPECT_EQ(
      openForNode(nodeCredentialKey(token(i)), "t1", "sb-other", "gh", **sealed).error().code(),
      Code::kPermissionDenied);  // moved to another sandbox
  EXPECT_FALSE(store_->sandboxCredential("sb-c", "missing")->has_value());

  // A new value reaches the node sealed again.
  gh.value = "Bearer two";
  ASSERT_TRUE(store_->putCredential(gh).ok());
  runBlocking(io_, [&]() -> asio::awaitable<bool> {
    co_await cluster.credentialChanged("t1", "gh");
    co_return true;
  }());
  EXPECT_EQ(open(i, "sb-c")->value, "Bearer two");

  // A fork copy: its own rows, for the same node.
  ASSERT_TRUE(
      store_->insertSandbox({"sb-c2", "t1", "minimal", store::SandboxState::kCreating}).ok());
  ASSERT_TRUE(fakes_[i]->prepareNetwork("t1", "sb-c", net).ok());
  auto copies = runBlocking(io_, cluster.fork("t1", "sb-c", {"sb-c2"}));
  ASSERT_TRUE(copies.ok()) << copies.error().message();
  EXPECT_EQ(open(i, "sb-c2")->value, "Bearer two");
  EXPECT_EQ(open(1 - i, "sb-c2").error().code(), Code::kPermissionDenied);

  // A network change to no credential: the node keeps none.
  ops::NetworkSpec none{"allowlist", {"api.github.test"}, {}, {}, {}};
  auto changed = runBlocking(io_, cluster.updateNetwork("t1", "sb-c", none));
  ASSERT_TRUE(changed.ok()) << changed.error().message();
  EXPECT_FALSE(store_->sandboxCredential("sb-c", "gh")->has_value());

  // Deleted: nothing of it stays for the node.
  ASSERT_TRUE(runBlocking(io_, cluster.destroy("sb-c2")).ok());
  EXPECT_FALSE(store_->sandboxCredential("sb-c2", "gh")->has_value());
}

}  // namespace
}  // namespace vessel::cluster

namespace vessel::cluster {
namespace {

// A build and a fork into a template through an API replica: each runs on
// a node over the node API and answers the node's manifest.
TEST_F(ClusterNodeTest, BuildsAndForksIntoTemplatesRunOnANode) {
  ops::BuildRequest req;
  req.spec.name = "t-0123456789ab-py";
  req.spec.commands = {"true"};
  req.spec.env = {"A=1"};
  req.spec.memory_mib = 512;
  req.base = "minimal";
  req.tenant = "t1";
  std::vector<std::string> steps;
  std::optional<Result<templates::Manifest>> done;
  ops::BuildCallbacks cb;
  cb.progress = [&](const std::string& step, int) { steps.push_back(step); };
  cb.done = [&](Result<templates::Manifest> m) { done.emplace(std::move(m)); };
  ASSERT_TRUE(cluster_->build(req, cb).ok());
  runBlocking(io_, [&]() -> asio::awaitable<bool> {
    asio::steady_timer t(io_);
    while (!done) {
      t.expires_after(5ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    co_return true;
  }());
  ASSERT_TRUE(done->ok()) << done->error().message();
  EXPECT_EQ((*done)->name, "t-0123456789ab-py");
  EXPECT_EQ((*done)->memory_mib, 512u);
  EXPECT_EQ(fakes_[0]->count("build t-0123456789ab-py from minimal") +
                fakes_[1]->count("build t-0123456789ab-py from minimal"),
            1);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps[0].rfind("building on node n", 0), 0u) << steps[0];
  // A Dockerfile build's context travels inline: a 3 MiB file, past the
  // node API's 2 MiB body limit and the JSON route's 1 MiB spec.
  {
    ops::BuildRequest big = req;
    big.spec.name = "t-0123456789ab-big";
    templates::BuildStep w;
    w.kind = templates::BuildStep::Kind::kWrite;
    w.path = "/data/big.bin";
    w.content.resize(3 << 20);
    for (size_t k = 0; k < w.content.size(); ++k) w.content[k] = static_cast<char>(k * 7919 >> 5);
    big.spec.steps.push_back(w);
    done.reset();
    ASSERT_TRUE(cluster_->build(big, cb).ok());
    runBlocking(io_, [&]() -> asio::awaitable<bool> {
      asio::steady_timer t(io_);
      while (!done) {
        t.expires_after(5ms);
        co_await t.async_wait(asio::use_awaitable);
      }
      co_return true;
    }());
    ASSERT_TRUE(done->ok()) << done->error().message();
    EXPECT_EQ(
        fakes_[0]->count("build t-0123456789ab-big") + fakes_[1]->count("build t-0123456789ab-big"),
        1);
  }
  // A failed build comes back as the node's error.
  fakes_[0]->fail_build.insert("t-0123456789ab-bad");
  fakes_[1]->fail_build.insert("t-0123456789ab-bad");
  req.spec.name = "t-0123456789ab-bad";
  done.reset();
  ASSERT_TRUE(cluster_->build(req, cb).ok());
  runBlocking(io_, [&]() -> asio::awaitable<bool> {
    asio::steady_timer t(io_);
    while (!done) {
      t.expires_after(5ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    co_return true;
  }());
  ASSERT_FALSE(done->ok());
  EXPECT_NE(done->error().message().find("the ready check never passed"), std::string::npos);

  // A fork into a template goes to the sandbox's node.
  ASSERT_TRUE(create("sb-f").ok());
  auto where = store_->sandboxNode("sb-f");
  ASSERT_TRUE(where.ok());
  int i = *where == "n0" ? 0 : 1;
  auto m = runBlocking(io_, cluster_->forkToTemplate("sb-f", "t-0123456789ab-snap"));
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->name, "t-0123456789ab-snap");
  EXPECT_EQ(fakes_[i]->count("fork-template sb-f"), 1);
  EXPECT_EQ(fakes_[1 - i]->count("fork-template"), 0);
}

}  // namespace
}  // namespace vessel::cluster
