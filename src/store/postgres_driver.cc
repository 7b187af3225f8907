// The SQL store's PostgreSQL driver (libpqxx), for several vesseld
// processes (API replicas) sharing one database. Statements outside a
// transaction run in autocommit mode at READ COMMITTED, PostgreSQL's
// default; what needs more says so in sql_store.cc and docs/design.md
// ("The store").
//
// Calls are synchronous, as with SQLite (they run on the io thread): each
// costs one or more round trips to the server, the price of sharing state.
#include <cstdlib>
#include <pqxx/pqxx>
#include <vector>

#include "store/sql_driver.h"
#include "store/sql_store.h"

namespace vessel::store {

namespace {

// Runs `f`, turning libpqxx's exceptions into Errors: none leave the
// driver. A unique key violation is kAlreadyExists as with SQLite; another
// constraint (a foreign key) is kFailedPrecondition. `broken` is set when
// the connection broke, so that the next connect() makes it again.
template <typename F>
auto guarded(bool& broken, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const pqxx::broken_connection& e) {
    broken = true;
    return Error(Code::kUnavailable, e.what());
  } catch (const pqxx::unique_violation& e) {
    return Error(Code::kAlreadyExists, e.what());
  } catch (const pqxx::integrity_constraint_violation& e) {
    return Error(Code::kFailedPrecondition, e.what());
  } catch (const std::exception& e) {
    return Error(Code::kUnavailable, e.what());
  }
}

class PostgresStatement final : public SqlStatement {
 public:
  // `tx`: the open transaction, or null for autocommit.
  PostgresStatement(pqxx::connection& c, pqxx::transaction_base* tx, std::string sql, bool& broken)
      : conn_(c), tx_(tx), sql_(std::move(sql)), broken_(broken) {}

  void bindText(std::string_view v) override { params_.emplace_back(std::string(v)); }
  void bindInt(int64_t v) override { params_.emplace_back(std::to_string(v)); }
  void bindNull() override { params_.emplace_back(std::nullopt); }
  Result<bool> step() override {
    if (!ran_) {
      ran_ = true;
      std::vector<const char*> values;  // null: SQL NULL
      values.reserve(params_.size());
      for (const auto& p : params_) values.push_back(p ? p->c_str() : nullptr);
      auto params = pqxx::prepare::make_dynamic_params(values);
      VESSEL_TRY(guarded(broken_, [&]() -> Status {
        if (tx_) {
          res_ = tx_->exec_params(sql_, params);
        } else {
          pqxx::nontransaction t(conn_);
          res_ = t.exec_params(sql_, params);
        }
        return okStatus();
      }));
    } else {
      ++row_;
    }
    if (row_ >= static_cast<int64_t>(res_.size())) return false;
    cur_.emplace(res_[static_cast<pqxx::result::size_type>(row_)]);
    return true;
  }
  int64_t changes() const override { return static_cast<int64_t>(res_.affected_rows()); }

  // Columns of the current row (step() returned true).
  std::string text(int col) const override {
    const auto f = (*cur_)[col];
    return f.is_null() ? std::string() : std::string(f.c_str(), f.size());
  }
  // The server sends integers (bigint, count(*)) as decimal text.
  int64_t integer(int col) const override {
    const auto f = (*cur_)[col];
    return f.is_null() ? 0 : std::strtoll(f.c_str(), nullptr, 10);
  }
  bool isNull(int col) const override { return (*cur_)[col].is_null(); }

 private:
  pqxx::connection& conn_;
  pqxx::transaction_base* tx_;
  const std::string sql_;
  bool& broken_;
  std::vector<std::optional<std::string>> params_;
  bool ran_ = false;
  pqxx::result res_;
  int64_t row_ = 0;
  std::optional<pqxx::row> cur_;  // res_'s row row_
};

class PostgresDriver final : public SqlDriver {
 public:
  PostgresDriver(std::string conninfo, std::string shown)
      : conninfo_(std::move(conninfo)), name_("postgres " + std::move(shown)) {}

  Dialect dialect() const override { return Dialect::kPostgres; }
  const std::string& name() const override { return name_; }
  Status connect() override {
    if (conn_ && conn_->is_open() && !broken_) return okStatus();
    conn_.reset();
    broken_ = false;
    return guarded(broken_, [&]() -> Status {
      conn_ = std::make_unique<pqxx::connection>(conninfo_);
      // The io thread waits for every statement: none may hold it for
      // long (a lock held by a stuck replica, a server in trouble).
      pqxx::nontransaction(*conn_).exec("SET statement_timeout = '30s'");
      return okStatus();
    });
  }
  Result<std::unique_ptr<SqlStatement>> prepare(const std::string& sql) override {
    if (!conn_) return Error(Code::kUnavailable, "not connected");
    return std::unique_ptr<SqlStatement>(
        std::make_unique<PostgresStatement>(*conn_, tx_.get(), sql, broken_));
  }
  Status execScript(const std::string& sql) override {
    if (!conn_) return Error(Code::kUnavailable, "not connected");
    return guarded(broken_, [&]() -> Status {
      if (tx_) {
        tx_->exec(sql);
      } else {
        pqxx::nontransaction(*conn_).exec(sql);
      }
      return okStatus();
    });
  }
  Status begin() override {
    if (!conn_) return Error(Code::kUnavailable, "not connected");
    return guarded(broken_, [&]() -> Status {
      tx_ = std::make_unique<pqxx::work>(*conn_);
      return okStatus();
    });
  }
  Status commit() override {
    auto tx = std::move(tx_);
    if (!tx) return Error(Code::kInternal, "commit without a transaction");
    return guarded(broken_, [&]() -> Status {
      tx->commit();
      return okStatus();
    });
  }
  // Ending the transaction object aborts it (and never throws).
  void rollback() override { tx_.reset(); }

 private:
  const std::string conninfo_;
  const std::string name_;
  std::unique_ptr<pqxx::connection> conn_;
  std::unique_ptr<pqxx::work> tx_;  // the open transaction, if any
  bool broken_ = false;
};

// Store calls block the io thread, so an unreachable server must not hold
// it for the kernel's TCP connect timeout (minutes): connect_timeout
// unless the URL sets one. Nor may a server whose link goes away while a
// reply is on its way (a node cut off from the network): TCP keepalives
// and tcp_user_timeout end such a connection in seconds, and the next
// call connects again. (Ignored on a Unix socket.)
std::string withConnectTimeout(const std::string& url) {
  std::string out = url;
  const bool uri = url.find("://") != std::string::npos;
  bool query = url.find('?') != std::string::npos;
  for (const char* kv : {"connect_timeout=5", "keepalives=1", "keepalives_idle=5",
                         "keepalives_interval=2", "keepalives_count=3", "tcp_user_timeout=10000"}) {
    std::string key(kv, std::string_view(kv).find('=') + 1);
    if (url.find(key) != std::string::npos) continue;
    if (!uri) {
      out += std::string(" ") + kv;
    } else {
      out += (query ? "&" : "?") + std::string(kv);
      query = true;
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<SqlDriver> postgresDriver(std::string conninfo, std::string shown) {
  return std::make_unique<PostgresDriver>(std::move(conninfo), std::move(shown));
}

std::string redactUrl(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos) {
    // key=value form: hide password=...
    auto at = url.find("password=");
    if (at == std::string::npos) return url;
    auto end = url.find(' ', at);
    return url.substr(0, at) + "password=***" + (end == std::string::npos ? "" : url.substr(end));
  }
  auto at = url.find('@', scheme + 3);
  auto slash = url.find('/', scheme + 3);
  if (at == std::string::npos || (slash != std::string::npos && slash < at)) return url;
  auto colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon) + ":***" + url.substr(at);
}

Result<std::unique_ptr<Store>> openPostgres(const std::string& url, const WallClock* clock) {
  auto s = openSqlStore(postgresDriver(withConnectTimeout(url), redactUrl(url)),
                        clock ? *clock : systemWallClock());
  if (!s.ok()) return std::move(s).error().withContext("open database " + redactUrl(url));
  return s;
}

}  // namespace vessel::store
