#pragma once
// The store test suite's fixture, shared by its files (store_test.cc,
// store_upgrade_test.cc): every TEST_P of StoreTest runs against SQLite (a
// file) and PostgreSQL (a real server in a private directory, one per test
// binary, a fresh database per test); store_test.cc instantiates it.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <pqxx/pqxx>
#include <string>

#include "base/clock.h"
#include "store/store.h"
#include "store/testing/postgres_server.h"

namespace vessel::store {

enum class Engine { kSqlite, kPostgres };

// The test binary's PostgreSQL server, started on first use (null, and
// `why`, when it cannot start).
testing::PostgresServer* pgServer(std::string* why = nullptr);

class StoreTest : public ::testing::TestWithParam<Engine> {
 protected:
  void SetUp() override {
    static int n = 0;
    if (GetParam() == Engine::kPostgres) {
      std::string why;
      auto* pg = pgServer(&why);
      ASSERT_NE(pg, nullptr) << why;
      db_ = "store_test_" + std::to_string(++n);
      auto url = pg->createDatabase(db_);
      ASSERT_TRUE(url.ok()) << url.error().message();
      url_ = *url;
    } else {
      url_ = ::testing::TempDir() + "/store_test_" + std::to_string(::getpid()) + "_" +
             std::to_string(++n) + ".db";
    }
  }
  void TearDown() override {
    if (GetParam() == Engine::kSqlite)
      for (const char* sfx : {"", "-wal", "-shm"}) ::unlink((url_ + sfx).c_str());
  }
  Result<std::unique_ptr<Store>> open() {
    return GetParam() == Engine::kPostgres ? openPostgres(url_, &clock_)
                                           : openSqlite(url_, &clock_);
  }
  // Tampers with the database behind the store's back.
  void rawExec(const std::string& sql) {
    if (GetParam() == Engine::kPostgres) {
      auto s = pgServer()->exec(db_, sql);
      ASSERT_TRUE(s.ok()) << s.error().message();
      return;
    }
    sqlite3* db;
    ASSERT_EQ(sqlite3_open(url_.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  // The first column of the first row, read behind the store's back.
  std::string rawText(const std::string& sql) {
    if (GetParam() == Engine::kPostgres) {
      pqxx::connection c(url_);
      pqxx::nontransaction w(c);
      return w.exec1(sql)[0].as<std::string>();
    }
    sqlite3* db;
    std::string out;
    EXPECT_EQ(sqlite3_open(url_.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK);
    if (st && sqlite3_step(st) == SQLITE_ROW)
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  }
  FakeWallClock clock_;
  std::string url_;  // the SQLite file or the PostgreSQL URL
  std::string db_;   // PostgreSQL: the database's name
};

}  // namespace vessel::store
