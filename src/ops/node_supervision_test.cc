// A cluster node's supervision: the decision table row by row, then the
// supervisor over the fake node and a real SQLite store (what it stores,
// the events it publishes, what it asks the node to do).
#include "ops/node_supervision.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "base/run_blocking.h"
#include "ops/testing/fake_node.h"

namespace vessel::ops {
namespace {

namespace fs = std::filesystem;
using K = NodeStep::Kind;
constexpr auto kRun = SandboxState::kRunning;
constexpr auto kPau = SandboxState::kPaused;
constexpr auto kNone = std::nullopt;

struct Row {
  NodeEvent ev;
  std::optional<SandboxState> placed;
  Holding holding;
  bool busy;
  K kind;
  const char* why;  // for kFail and kDestroy
};

// The whole table: every event against what the store places here, what
// the node holds and whether a call for the sandbox is in flight.
const Row kTable[] = {
    // Start: the store's placements are adopted, or failed when they
    // cannot be (running or paused only: a sandbox between states is its
    // operation's to settle).
    {NodeEvent::kStart, kRun, Holding::kRunning, false, K::kKeep, ""},
    {NodeEvent::kStart, kPau, Holding::kPaused, false, K::kKeep, ""},
    {NodeEvent::kStart, kRun, Holding::kNothing, false, K::kFail,
     "node n1 restarted and could not take it over"},
    {NodeEvent::kStart, kPau, Holding::kNothing, false, K::kFail,
     "node n1 restarted and could not take it over"},
    {NodeEvent::kStart, SandboxState::kCreating, Holding::kNothing, false, K::kNothing, ""},
    {NodeEvent::kStart, SandboxState::kDeleting, Holding::kNothing, false, K::kNothing, ""},
    {NodeEvent::kStart, kNone, Holding::kRunning, false, K::kDestroy, "not placed here"},
    {NodeEvent::kStart, kNone, Holding::kNothing, false, K::kNothing, ""},
    // Resync: what the store no longer places here goes, unless a call for
    // it is in flight (a create the store has not recorded yet).
    {NodeEvent::kResync, kNone, Holding::kRunning, false, K::kDestroy,
     "no longer placed on node n1"},
    {NodeEvent::kResync, kNone, Holding::kPaused, false, K::kDestroy,
     "no longer placed on node n1"},
    {NodeEvent::kResync, kNone, Holding::kRunning, true, K::kNothing, ""},
    {NodeEvent::kResync, kRun, Holding::kRunning, false, K::kKeep, ""},
    {NodeEvent::kResync, kPau, Holding::kPaused, true, K::kNothing, ""},
    {NodeEvent::kResync, kRun, Holding::kNothing, false, K::kNothing, ""},
    // Lost: the sandbox fails, unless it already ended or a call in flight
    // settles it (the busy guard).
    {NodeEvent::kLost, kRun, Holding::kNothing, false, K::kFail, "the VM exited"},
    {NodeEvent::kLost, SandboxState::kPausing, Holding::kNothing, false, K::kFail, "the VM exited"},
    {NodeEvent::kLost, kRun, Holding::kNothing, true, K::kNothing, ""},
    {NodeEvent::kLost, kNone, Holding::kNothing, false, K::kNothing, ""},
    // A clean stop that stopped the VM.
    {NodeEvent::kStopped, kRun, Holding::kNothing, false, K::kFail,
     "node n1 stopped; the VM was stopped"},
    {NodeEvent::kStopped, kNone, Holding::kNothing, false, K::kNothing, ""},
};

TEST(NodeSupervisionTest, DecisionTable) {
  int row = 0;
  for (const auto& r : kTable) {
    NodeStep got = decideNodeStep(r.ev, r.placed, r.holding, r.busy, "n1", "the VM exited");
    EXPECT_EQ(got.kind, r.kind) << "row " << row;
    EXPECT_EQ(got.why, r.why) << "row " << row;
    ++row;
  }
}

class NodeSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/node-supervision-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto s = store::openSqlite(dir_ + "/vessel.db", &clock_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    ASSERT_TRUE(store_->createTenant("t1", "one").ok());
    node_ = std::make_unique<testing::FakeNode>(io_);
    sup_ = std::make_unique<NodeSupervisor>(
        *store_, *node_, [this](const std::string& id) { return node_->busy(id); }, "n1", clock_);
    sup_->setMetrics(metrics_);
  }
  void TearDown() override {
    sup_.reset();
    fs::remove_all(dir_);
  }
  // A sandbox the store places on `node` in `state`.
  void place(const std::string& id, SandboxState state, const std::string& node = "n1") {
    store::SandboxRecord r;
    r.id = id;
    r.tenant_id = "t1";
    r.template_name = "minimal";
    r.state = state;
    ASSERT_TRUE(store_->insertSandbox(r).ok());
    ASSERT_TRUE(store_->setSandboxNode(id, node).ok());
  }
  std::string state(const std::string& id) {
    auto sb = store_->getSandbox("t1", id);
    if (!sb.ok() || !*sb) return "absent";
    return std::string(stateName((*sb)->state));
  }
  std::string error(const std::string& id) {
    auto sb = store_->getSandbox("t1", id);
    return sb.ok() && *sb ? (*sb)->error : "";
  }
  // The sandbox.state events of `id`, as stored.
  int failedEvents(const std::string& id) {
    int n = 0;
    auto ev = store_->listEvents("t1", "", 0, 1000);
    if (ev.ok())
      for (auto& e : *ev)
        n += e.sandbox_id == id && e.type == "sandbox.state" &&
             e.data_json.find("failed") != std::string::npos;
    return n;
  }
  bool metricSays(const std::string& line) {
    return metrics_.render().find(line) != std::string::npos;
  }
  template <typename T>
  T run(asio::awaitable<T> a) {
    return runBlocking(io_, std::move(a));
  }

  std::string dir_;
  FakeWallClock clock_;
  asio::io_context io_;
  metrics::Registry metrics_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<testing::FakeNode> node_;
  std::unique_ptr<NodeSupervisor> sup_;
};

TEST_F(NodeSupervisorTest, StartAdoptsWhatTheStorePlacesHereAndFailsTheRest) {
  place("sb-kept", kRun);
  place("sb-paused", kPau);
  place("sb-gone", kRun);
  place("sb-creating", SandboxState::kCreating);
  place("sb-other", kRun, "n2");
  node_->adoptable["sb-kept"] = Holding::kRunning;
  node_->adoptable["sb-paused"] = Holding::kPaused;
  node_->adoptable["sb-other"] = Holding::kRunning;
  EXPECT_EQ(run(sup_->start()), 2);
  EXPECT_EQ(state("sb-kept"), "running");
  EXPECT_EQ(state("sb-paused"), "paused");
  EXPECT_EQ(state("sb-gone"), "failed");
  EXPECT_EQ(error("sb-gone"), "node n1 restarted and could not take it over");
  EXPECT_EQ(failedEvents("sb-gone"), 1);
  // Between states: its API replica's operation settles it.
  EXPECT_EQ(state("sb-creating"), "creating");
  // Another node's sandbox is not even looked at.
  EXPECT_EQ(node_->count("adopt sb-other"), 0);
  EXPECT_EQ(state("sb-other"), "running");
  ASSERT_TRUE(node_->kept.has_value());
  EXPECT_EQ(*node_->kept, (std::set<std::string>{"sb-kept", "sb-paused"}));
}

TEST_F(NodeSupervisorTest, ALostVmFailsItsSandboxUnlessACallIsInFlight) {
  place("sb-a", kRun);
  place("sb-b", kRun);
  node_->adoptable["sb-a"] = Holding::kRunning;
  node_->adoptable["sb-b"] = Holding::kRunning;
  run(sup_->start());
  node_->lose("sb-a", "the VM exited (status 9)");
  EXPECT_EQ(state("sb-a"), "failed");
  EXPECT_EQ(error("sb-a"), "the VM exited (status 9)");
  EXPECT_EQ(failedEvents("sb-a"), 1);
  EXPECT_TRUE(metricSays("vessel_sandboxes_lost_total 1"));
  // A pause in flight when its VM went: the caller settles it.
  node_->busy_ids.insert("sb-b");
  node_->lose("sb-b", "the agent channel failed");
  EXPECT_EQ(state("sb-b"), "running");
  EXPECT_TRUE(metricSays("vessel_sandboxes_lost_total 1"));
  // Lost again after it failed: nothing more is stored.
  node_->held["sb-a"] = Holding::kRunning;
  node_->lose("sb-a", "again");
  EXPECT_EQ(failedEvents("sb-a"), 1);
  EXPECT_EQ(error("sb-a"), "the VM exited (status 9)");
}

TEST_F(NodeSupervisorTest, ResyncDestroysWhatTheStoreNoLongerPlacesHere) {
  place("sb-keep", kRun);
  place("sb-failed", kRun);
  place("sb-moved", kRun);
  for (const char* id : {"sb-keep", "sb-failed", "sb-moved", "sb-new", "sb-creating"})
    node_->held[id] = Holding::kRunning;
  // While the node was cut off, the API replicas failed one sandbox and
  // placed another elsewhere; one create is still in flight here.
  ASSERT_TRUE(store_->setSandboxState("sb-failed", SandboxState::kFailed, "node n1 lost").ok());
  ASSERT_TRUE(store_->setSandboxNode("sb-moved", "n2").ok());
  node_->busy_ids.insert("sb-creating");
  std::vector<std::string> held;
  for (const auto& [id, h] : node_->held) held.push_back(id);
  EXPECT_EQ(run(sup_->resync(held)), 3);
  EXPECT_EQ(node_->count("destroy sb-failed"), 1);
  EXPECT_EQ(node_->count("destroy sb-moved"), 1);
  EXPECT_EQ(node_->count("destroy sb-new"), 1);
  EXPECT_EQ(node_->count("destroy sb-keep"), 0);
  EXPECT_EQ(node_->count("destroy sb-creating"), 0);
  EXPECT_EQ(state("sb-keep"), "running");
}

TEST_F(NodeSupervisorTest, ACleanStopThatStopsVmsFailsTheirSandboxesWithEvents) {
  place("sb-a", kRun);
  node_->adoptable["sb-a"] = Holding::kRunning;
  run(sup_->start());
  EXPECT_EQ(run(sup_->shutdown(true)), 1);
  EXPECT_EQ(state("sb-a"), "failed");
  EXPECT_EQ(error("sb-a"), "node n1 stopped; the VM was stopped");
  EXPECT_EQ(failedEvents("sb-a"), 1);
}

TEST_F(NodeSupervisorTest, ACleanStopThatLeavesVmsStoresNothing) {
  place("sb-a", kRun);
  node_->adoptable["sb-a"] = Holding::kRunning;
  run(sup_->start());
  EXPECT_EQ(run(sup_->shutdown(false)), 0);
  EXPECT_EQ(state("sb-a"), "running");
  EXPECT_EQ(failedEvents("sb-a"), 0);
}

}  // namespace
}  // namespace vessel::ops
