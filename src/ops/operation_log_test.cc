// Who the operation log wakes: a tenant's SSE streams and awaits are woken by
// that tenant's events only (an operation's stream by that operation's), so
// a tenant publishing in a loop costs other tenants' subscribers nothing.
// Counted through Subscription::deliveries(), not timed.
#include "ops/operation_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <filesystem>

#include "base/run_blocking.h"

namespace vessel::ops {
namespace {

namespace fs = std::filesystem;

class OperationLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/oplog-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto s = store::openSqlite(dir_ + "/vessel.db", &clock_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    ASSERT_TRUE(store_->createTenant("a", "A").ok());
    ASSERT_TRUE(store_->createTenant("b", "B").ok());
    log_ = std::make_unique<OperationLog>(*store_, clock_);
  }
  void TearDown() override {
    log_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  void publish(const std::string& tenant, const std::string& op = "") {
    log_->publish({0, tenant, op, "", "test.event", "{}"});
  }
  // wait() with a deadline already passed: true only if an event is pending.
  bool pending(OperationLog::Subscription& s) {
    return runBlocking(io_, s.wait(std::chrono::steady_clock::now()));
  }

  std::string dir_;
  FakeWallClock clock_;
  boost::asio::io_context io_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<OperationLog> log_;
};

TEST_F(OperationLogTest, ASubscriberIsNeverWokenByAnotherTenantsEvents) {
  auto a = log_->subscribe("a", io_.get_executor());
  auto b = log_->subscribe("b", io_.get_executor());
  for (int i = 0; i < 50; ++i) publish("b");
  EXPECT_EQ(a->deliveries(), 0u);
  EXPECT_FALSE(pending(*a));
  EXPECT_EQ(b->deliveries(), 50u);
  EXPECT_TRUE(pending(*b));

  publish("a");
  EXPECT_EQ(a->deliveries(), 1u);
  EXPECT_TRUE(pending(*a));
  EXPECT_EQ(b->deliveries(), 50u);
}

TEST_F(OperationLogTest, AnOperationsStreamIsWokenByThatOperationOnly) {
  auto op = log_->begin("a", "", "create");
  ASSERT_TRUE(op.ok()) << op.error().message();
  auto mine = log_->subscribe("a", io_.get_executor(), op->id);
  auto all = log_->subscribe("a", io_.get_executor());
  for (int i = 0; i < 10; ++i) publish("a", "op-someone-else");
  EXPECT_EQ(mine->deliveries(), 0u);
  EXPECT_EQ(all->deliveries(), 10u);

  log_->set(*op, store::OpState::kDone);
  EXPECT_EQ(mine->deliveries(), 1u);
  EXPECT_TRUE(pending(*mine));
  EXPECT_EQ(all->deliveries(), 11u);
}

TEST_F(OperationLogTest, AwaitEndsOnItsOperationsEventDespiteOtherTraffic) {
  auto op = log_->begin("a", "", "create");
  ASSERT_TRUE(op.ok());
  std::optional<Result<store::OperationRecord>> got;
  boost::asio::co_spawn(
      io_,
      [&]() -> boost::asio::awaitable<void> {
        got.emplace(co_await log_->await("a", op->id,
                                         std::chrono::steady_clock::now() + std::chrono::hours(1)));
      },
      boost::asio::detached);
  io_.poll();
  for (int i = 0; i < 20; ++i) publish("b");
  for (int i = 0; i < 20; ++i) publish("a", "op-other");
  io_.poll();
  EXPECT_FALSE(got.has_value());
  log_->set(*op, store::OpState::kDone);
  io_.restart();
  while (!got) io_.run_one();
  ASSERT_TRUE(got->ok()) << got->error().message();
  EXPECT_EQ((*got)->state, store::OpState::kDone);
}

// Front ends free a sandbox's state when it ends: they hear every state
// set, for as long as they hold their registration.
TEST_F(OperationLogTest, SandboxStatesReachTheirListenersWhileTheyAreHeld) {
  std::vector<std::pair<std::string, store::SandboxState>> heard;
  auto fn = log_->onSandboxState(
      [&](const std::string& tenant, const std::string& id, store::SandboxState st) {
        heard.emplace_back(tenant + "/" + id, st);
      });
  log_->setSandbox("a", "op-1", "sb-1", store::SandboxState::kDeleting);
  log_->setSandbox("b", "op-2", "sb-2", store::SandboxState::kFailed, "lost");
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0].first, "a/sb-1");
  EXPECT_EQ(heard[0].second, store::SandboxState::kDeleting);
  EXPECT_EQ(heard[1].first, "b/sb-2");
  EXPECT_EQ(heard[1].second, store::SandboxState::kFailed);
  fn.reset();
  log_->setSandbox("a", "op-3", "sb-1", store::SandboxState::kDeleted);
  EXPECT_EQ(heard.size(), 2u) << "a dropped registration hears nothing";
}

// An operation begun for a request names it in every event of its own,
// until it ends; one begun outside a request, and the calls after the
// request's, name none (issue 28 item 2).
TEST_F(OperationLogTest, AnOperationsEventsNameTheRequestThatBeganIt) {
  auto op = log_->forRequest("req-abc123", [&] { return log_->begin("a", "", "build"); });
  ASSERT_TRUE(op.ok()) << op.error().message();
  auto other = log_->begin("a", "", "build");
  ASSERT_TRUE(other.ok());
  log_->set(*op, store::OpState::kRunning);
  log_->set(*op, store::OpState::kDone);
  log_->set(*other, store::OpState::kDone);
  EXPECT_EQ(log_->requestOf(op->id), "") << "forgotten once it ended";
  auto events = store_->listEvents("a", "", 0, 100);
  ASSERT_TRUE(events.ok());
  int named = 0;
  for (const auto& e : *events) {
    auto v = boost::json::parse(e.data_json).as_object();
    auto* r = v.if_contains("request_id");
    if (e.operation_id == op->id) {
      ASSERT_NE(r, nullptr) << e.type << " " << e.data_json;
      EXPECT_EQ(r->as_string(), "req-abc123");
      ++named;
    } else {
      EXPECT_EQ(r, nullptr) << e.type << " " << e.data_json;
    }
  }
  EXPECT_EQ(named, 3);  // pending, running, done
}

}  // namespace
}  // namespace vessel::ops
