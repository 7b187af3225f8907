#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include "store/store.h"

namespace vessel::store {
namespace {

class SqliteStoreTest : public ::testing::Test {
 protected:
  std::string path_ = ::testing::TempDir() + "/store_test_" + std::to_string(::getpid()) + ".db";
  void TearDown() override {
    for (const char* sfx : {"", "-wal", "-shm"}) ::unlink((path_ + sfx).c_str());
  }
};

TEST_F(SqliteStoreTest, MigratesAndPersists) {
  {
    auto s = openSqlite(path_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    EXPECT_EQ((*s)->schemaVersion(), 2);
    ASSERT_TRUE((*s)->setMeta("instance_id", "abc").ok());
    ASSERT_TRUE((*s)->setMeta("instance_id", "def").ok());
  }
  auto s = openSqlite(path_);
  ASSERT_TRUE(s.ok());
  auto v = (*s)->getMeta("instance_id");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->value_or(""), "def");
  EXPECT_FALSE((*s)->getMeta("missing")->has_value());
}

TEST_F(SqliteStoreTest, RefusesNewerSchema) {
  {
    sqlite3* db;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "PRAGMA user_version=999", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  auto s = openSqlite(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kFailedPrecondition);
}

TEST_F(SqliteStoreTest, EveryQueryIsScopedToItsTenant) {
  auto s = openSqlite(path_);
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  ASSERT_TRUE(st.createTenant("t2", "two").ok());
  EXPECT_EQ(st.createTenant("t1", "again").error().code(), Code::kAlreadyExists);
  ASSERT_TRUE(st.addApiKey("t1", "hash1").ok());
  EXPECT_EQ(st.tenantForKey("hash1")->value_or(""), "t1");
  EXPECT_FALSE(st.tenantForKey("hash2")->has_value());

  SandboxRecord a{"sb-a", "t1", "minimal", "running"};
  SandboxRecord b{"sb-b", "t2", "minimal", "running"};
  ASSERT_TRUE(st.insertSandbox(a).ok());
  ASSERT_TRUE(st.insertSandbox(b).ok());
  EXPECT_TRUE(st.getSandbox("t1", "sb-a")->has_value());
  EXPECT_FALSE(st.getSandbox("t2", "sb-a")->has_value());
  auto l1 = st.listSandboxes("t1", "", 10);
  ASSERT_TRUE(l1.ok());
  ASSERT_EQ(l1->size(), 1u);
  EXPECT_EQ((*l1)[0].id, "sb-a");

  OperationRecord o{"op-1", "t1", "sb-a", "create", "pending"};
  ASSERT_TRUE(st.insertOperation(o).ok());
  EXPECT_FALSE(st.getOperation("t2", "op-1")->has_value());
  ASSERT_TRUE(st.setOperationState("op-1", "failed", "internal", "boom").ok());
  EXPECT_EQ((*st.getOperation("t1", "op-1"))->error_message, "boom");

  EventRecord e1{0, "t1", "op-1", "sb-a", "operation.running"};
  EventRecord e2{0, "t2", "op-2", "sb-b", "operation.running"};
  EventRecord e3{0, "t1", "op-9", "sb-a", "operation.done"};
  auto s1 = st.appendEvent(e1);
  ASSERT_TRUE(s1.ok());
  ASSERT_TRUE(st.appendEvent(e2).ok());
  auto s3 = st.appendEvent(e3);
  ASSERT_TRUE(s3.ok());
  EXPECT_LT(*s1, *s3);
  auto all = st.listEvents("t1", "", 0, 100);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].seq, *s3);
  EXPECT_EQ(st.listEvents("t1", "op-1", 0, 100)->size(), 1u);
  EXPECT_EQ(st.listEvents("t1", "", *s1, 100)->size(), 1u);
}

TEST_F(SqliteStoreTest, FailInFlightLeavesPausedSandboxes) {
  auto s = openSqlite(path_);
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  SandboxRecord a{"sb-a", "t1", "minimal", "creating"};
  SandboxRecord p{"sb-p", "t1", "minimal", "paused"};
  ASSERT_TRUE(st.insertSandbox(a).ok());
  ASSERT_TRUE(st.insertSandbox(p).ok());
  OperationRecord o{"op-1", "t1", "sb-a", "create", "running"};
  ASSERT_TRUE(st.insertOperation(o).ok());
  EXPECT_EQ(st.failInFlight("restarted").value_or(-1), 1);
  EXPECT_EQ((*st.getSandbox("t1", "sb-a"))->state, "failed");
  EXPECT_EQ((*st.getSandbox("t1", "sb-a"))->error, "restarted");
  EXPECT_EQ((*st.getSandbox("t1", "sb-p"))->state, "paused");
  EXPECT_EQ((*st.getOperation("t1", "op-1"))->state, "failed");
}

TEST_F(SqliteStoreTest, UnopenablePathIsAnError) {
  auto s = openSqlite("/nonexistent-dir/x.db");
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace vessel::store
