// The SQL store's SQLite driver: one connection, opened in WAL mode.
#include <sqlite3.h>

#include "store/sql_driver.h"
#include "store/sql_store.h"

namespace vessel::store {

// The store's SQL takes new keys and claimed rows back with RETURNING.
static_assert(SQLITE_VERSION_NUMBER >= 3035000, "the SQL store needs SQLite 3.35 or later");

namespace {

Error sqliteError(sqlite3* db, int rc) {
  // Every constraint is kAlreadyExists, as it always was on SQLite.
  return Error(rc == SQLITE_CONSTRAINT ? Code::kAlreadyExists : Code::kUnavailable,
               sqlite3_errmsg(db));
}

class SqliteStatement final : public SqlStatement {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* st) : db_(db), st_(st) {}
  ~SqliteStatement() override { sqlite3_finalize(st_); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  void bindText(std::string_view v) override {
    sqlite3_bind_text(st_, ++n_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void bindInt(int64_t v) override { sqlite3_bind_int64(st_, ++n_, v); }
  void bindNull() override { sqlite3_bind_null(st_, ++n_); }
  Result<bool> step() override {
    const int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) {
      changes_ = sqlite3_changes(db_);
      return false;
    }
    return sqliteError(db_, rc);
  }
  int64_t changes() const override { return changes_; }

  std::string text(int col) const override {
    const unsigned char* p = sqlite3_column_text(st_, col);
    // SAFETY: sqlite3_column_text returns UTF-8 text of sqlite3_column_bytes bytes.
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(st_, col)))
             : std::string();
  }
  int64_t integer(int col) const override { return sqlite3_column_int64(st_, col); }
  bool isNull(int col) const override { return sqlite3_column_type(st_, col) == SQLITE_NULL; }

 private:
  sqlite3* db_;
  sqlite3_stmt* st_;
  int n_ = 0;
  int64_t changes_ = 0;
};

class SqliteDriver final : public SqlDriver {
 public:
  explicit SqliteDriver(sqlite3* db) : db_(db) {}
  ~SqliteDriver() override { sqlite3_close_v2(db_); }
  SqliteDriver(const SqliteDriver&) = delete;
  SqliteDriver& operator=(const SqliteDriver&) = delete;

  Dialect dialect() const override { return Dialect::kSqlite; }
  const std::string& name() const override { return name_; }
  Status connect() override { return okStatus(); }  // a file does not go away
  Result<std::unique_ptr<SqlStatement>> prepare(const std::string& sql) override {
    sqlite3_stmt* st = nullptr;
    if (const int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr); rc != SQLITE_OK) {
      sqlite3_finalize(st);
      return sqliteError(db_, rc).withContext("prepare");
    }
    return std::unique_ptr<SqlStatement>(std::make_unique<SqliteStatement>(db_, st));
  }
  Status execScript(const std::string& sql) override {
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
      std::string m = msg ? msg : "?";
      sqlite3_free(msg);
      return Error(Code::kUnavailable, m);
    }
    return okStatus();
  }
  // IMMEDIATE: the write lock before the first read, so no other
  // connection's write lands between a transaction's check and its write.
  Status begin() override { return execScript("BEGIN IMMEDIATE"); }
  Status commit() override { return execScript("COMMIT"); }
  void rollback() override { (void)execScript("ROLLBACK"); }

 private:
  sqlite3* db_;
  const std::string name_ = "sqlite";
};

}  // namespace

Result<std::unique_ptr<SqlDriver>> openSqliteDriver(const std::string& path) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string m = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return Error(Code::kUnavailable, m);
  }
  auto d = std::make_unique<SqliteDriver>(db);
  // The busy timeout first: switching to WAL takes a lock that another
  // opener (the CLI, a second store in a test) may hold for a moment.
  sqlite3_busy_timeout(db, 5000);
  VESSEL_TRY_CTX(d->execScript("PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;"
                               "PRAGMA foreign_keys=ON;"),
                 "sqlite");
  return std::unique_ptr<SqlDriver>(std::move(d));
}

Result<std::unique_ptr<Store>> openSqlite(const std::string& path, const WallClock* clock) {
  auto d = openSqliteDriver(path);
  if (!d.ok()) return std::move(d).error().withContext("open database " + path);
  auto s = openSqlStore(std::move(*d), clock ? *clock : systemWallClock());
  if (!s.ok()) return std::move(s).error().withContext("open database " + path);
  return s;
}

}  // namespace vessel::store
