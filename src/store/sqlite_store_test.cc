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
    EXPECT_EQ((*s)->schemaVersion(), 1);
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

TEST_F(SqliteStoreTest, UnopenablePathIsAnError) {
  auto s = openSqlite("/nonexistent-dir/x.db");
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace vessel::store
