#include <sqlite3.h>

#include <vector>

#include "store/store.h"

namespace vessel::store {

namespace {

// Migration N takes the schema from version N to N+1. Never edit one that
// has shipped; append a new one.
const std::vector<const char*> kMigrations = {
    // 0 -> 1
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
};

class SqliteStore : public Store {
 public:
  explicit SqliteStore(sqlite3* db) : db_(db) {}
  ~SqliteStore() override { sqlite3_close_v2(db_); }

  std::string_view engine() const override { return "sqlite"; }
  int schemaVersion() const override { return version_; }

  Status init() {
    VESSEL_TRY(exec("PRAGMA journal_mode=WAL;"));
    VESSEL_TRY(exec("PRAGMA synchronous=NORMAL;"));
    VESSEL_TRY(exec("PRAGMA foreign_keys=ON;"));
    sqlite3_busy_timeout(db_, 5000);
    VESSEL_ASSIGN_OR_RETURN(version_, userVersion());
    if (version_ > static_cast<int>(kMigrations.size()))
      return Error(Code::kFailedPrecondition, "database schema version " +
                                                  std::to_string(version_) +
                                                  " is newer than this vesseld knows (" +
                                                  std::to_string(kMigrations.size()) + ")");
    while (version_ < static_cast<int>(kMigrations.size())) {
      std::string sql = std::string("BEGIN IMMEDIATE;") + kMigrations[version_] +
                        "PRAGMA user_version=" + std::to_string(version_ + 1) + ";COMMIT;";
      if (auto s = exec(sql.c_str()); !s.ok()) {
        (void)exec("ROLLBACK;");
        return std::move(s).error().withContext("migration " + std::to_string(version_));
      }
      ++version_;
    }
    return okStatus();
  }

  Result<std::optional<std::string>> getMeta(const std::string& key) override {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, "SELECT value FROM meta WHERE key=?", -1, &st, nullptr) !=
        SQLITE_OK)
      return err("prepare");
    sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
    std::optional<std::string> out;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
      out = std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return err("get meta " + key);
    return out;
  }

  Status setMeta(const std::string& key, const std::string& value) override {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_,
                           "INSERT INTO meta(key,value) VALUES(?,?) "
                           "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                           -1, &st, nullptr) != SQLITE_OK)
      return err("prepare");
    sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, value.c_str(), -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return err("set meta " + key);
    return okStatus();
  }

 private:
  Error err(const std::string& what) const {
    return Error(Code::kUnavailable, "sqlite: " + what + ": " + sqlite3_errmsg(db_));
  }
  Status exec(const char* sql) {
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
      std::string m = msg ? msg : "?";
      sqlite3_free(msg);
      return Error(Code::kUnavailable, std::string("sqlite: ") + m);
    }
    return okStatus();
  }
  Result<int> userVersion() {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &st, nullptr) != SQLITE_OK)
      return err("user_version");
    int v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    return v;
  }

  sqlite3* db_;
  int version_ = 0;
};

}  // namespace

Result<std::unique_ptr<Store>> openSqlite(const std::string& path) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string m = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return Error(Code::kUnavailable, "open database " + path + ": " + m);
  }
  auto s = std::make_unique<SqliteStore>(db);
  if (auto r = s->init(); !r.ok()) return std::move(r).error().withContext("open database " + path);
  return std::unique_ptr<Store>(std::move(s));
}

}  // namespace vessel::store
