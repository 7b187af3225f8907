// The sandbox log in the store (migration 12), on both engines: entries in
// order with their filters, scoped to the sandbox's tenant, bounded per
// sandbox, and collected once their sandbox has ended long enough ago.
#include <gtest/gtest.h>

#include "store/store.h"
#include "store/store_test.h"

namespace vessel::store {
namespace {

std::vector<std::string> kinds(const std::vector<LogRecord>& v) {
  std::vector<std::string> out;
  for (const auto& r : v) out.push_back(r.kind + ":" + r.data_json);
  return out;
}

class StoreLogsTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    auto s = open();
    ASSERT_TRUE(s.ok()) << s.error().message();
    st_ = std::move(*s);
    ASSERT_TRUE(st_->createTenant("t1", "one").ok());
    ASSERT_TRUE(st_->createTenant("t2", "two").ok());
    ASSERT_TRUE(st_->insertSandbox({"sb-a", "t1", "minimal", SandboxState::kRunning}).ok());
    ASSERT_TRUE(st_->insertSandbox({"sb-b", "t2", "minimal", SandboxState::kRunning}).ok());
  }
  int64_t add(const std::string& sb, const std::string& kind, const std::string& data,
              int64_t at_ms = 0) {
    auto seq = st_->appendLog({0, sb, kind, data, at_ms});
    EXPECT_TRUE(seq.ok()) << seq.error().message();
    return seq.value_or(0);
  }
  std::unique_ptr<Store> st_;
};

INSTANTIATE_TEST_SUITE_P(Engines, StoreLogsTest,
                         ::testing::Values(Engine::kSqlite, Engine::kPostgres), [](const auto& p) {
                           return p.param == Engine::kSqlite ? "Sqlite" : "Postgres";
                         });

TEST_P(StoreLogsTest, ReadsInOrderWithFilters) {
  clock_.set(1000);
  int64_t s1 = add("sb-a", "lifecycle", R"({"event":"created"})");
  clock_.set(2000);
  int64_t s2 = add("sb-a", "command", R"({"phase":"start"})");
  add("sb-b", "command", R"({"other":1})");
  int64_t s3 = add("sb-a", "command", R"({"phase":"exit"})", 3000);
  EXPECT_LT(s1, s2);
  EXPECT_LT(s2, s3);

  auto all = st_->listLogs("t1", "sb-a", {});
  ASSERT_TRUE(all.ok()) << all.error().message();
  EXPECT_EQ(kinds(*all), (std::vector<std::string>{R"(lifecycle:{"event":"created"})",
                                                   R"(command:{"phase":"start"})",
                                                   R"(command:{"phase":"exit"})"}));
  EXPECT_EQ((*all)[0].at_ms, 1000);
  EXPECT_EQ((*all)[2].at_ms, 3000);

  LogQuery q;
  q.kind = "command";
  EXPECT_EQ(st_->listLogs("t1", "sb-a", q)->size(), 2u);
  q = {};
  q.since_ms = 2000;
  EXPECT_EQ(st_->listLogs("t1", "sb-a", q)->size(), 2u);
  q = {};
  q.until_ms = 2000;
  EXPECT_EQ(st_->listLogs("t1", "sb-a", q)->size(), 2u);
  q = {};
  q.after_seq = s2;
  ASSERT_EQ(st_->listLogs("t1", "sb-a", q)->size(), 1u);
  EXPECT_EQ(st_->listLogs("t1", "sb-a", q)->front().seq, s3);
  q = {};
  q.newest_first = true;
  q.limit = 1;
  ASSERT_EQ(st_->listLogs("t1", "sb-a", q)->size(), 1u);
  EXPECT_EQ(st_->listLogs("t1", "sb-a", q)->front().seq, s3);
}

TEST_P(StoreLogsTest, AnotherTenantsSandboxHasNoEntries) {
  add("sb-a", "lifecycle", "{}");
  add("sb-b", "lifecycle", "{}");
  EXPECT_TRUE(st_->listLogs("t2", "sb-a", {})->empty());
  EXPECT_TRUE(st_->listLogs("t1", "sb-b", {})->empty());
  EXPECT_EQ(st_->listLogs("t2", "sb-b", {})->size(), 1u);
}

TEST_P(StoreLogsTest, TrimKeepsTheNewest) {
  for (int i = 0; i < 10; ++i) add("sb-a", "command", "{\"i\":" + std::to_string(i) + "}");
  add("sb-b", "command", "{}");
  auto gone = st_->trimLogs("sb-a", 4);
  ASSERT_TRUE(gone.ok()) << gone.error().message();
  EXPECT_EQ(*gone, 6);
  auto left = st_->listLogs("t1", "sb-a", {});
  ASSERT_EQ(left->size(), 4u);
  EXPECT_EQ(left->front().data_json, R"({"i":6})");
  EXPECT_EQ(left->back().data_json, R"({"i":9})");
  EXPECT_EQ(*st_->trimLogs("sb-a", 4), 0);                 // at the bound: nothing goes
  EXPECT_EQ(*st_->trimLogs("sb-a", 100), 0);               // under it: nothing either
  EXPECT_EQ(st_->listLogs("t2", "sb-b", {})->size(), 1u);  // other sandboxes untouched
}

TEST_P(StoreLogsTest, CollectsOnlyThoseEndedBeforeTheCutoff) {
  add("sb-a", "lifecycle", "{}");
  add("sb-b", "lifecycle", "{}");
  ASSERT_TRUE(st_->insertSandbox({"sb-c", "t1", "minimal", SandboxState::kRunning}).ok());
  add("sb-c", "lifecycle", "{}");
  clock_.set(10'000);
  ASSERT_TRUE(st_->setSandboxState("sb-a", SandboxState::kDeleted, "").ok());
  clock_.set(20'000);
  ASSERT_TRUE(st_->setSandboxState("sb-b", SandboxState::kFailed, "lost").ok());
  // sb-a ended at 10 s, sb-b at 20 s, sb-c is running.
  EXPECT_EQ(*st_->collectLogs(10'000), 0);
  EXPECT_EQ(*st_->collectLogs(15'000), 1);
  EXPECT_TRUE(st_->listLogs("t1", "sb-a", {})->empty());
  EXPECT_EQ(st_->listLogs("t2", "sb-b", {})->size(), 1u);
  EXPECT_EQ(*st_->collectLogs(1'000'000), 1);
  EXPECT_EQ(st_->listLogs("t1", "sb-c", {})->size(), 1u);  // a live sandbox's log stays
}

}  // namespace
}  // namespace vessel::store
