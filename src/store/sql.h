#pragma once
// The SQL store's statements, as its calls run them: rendered for the
// driver's dialect (sql_dialect.h), parameters bound in order from C++
// values, rows read by a function of an SqlRow, errors prefixed with the
// engine and what the call was doing ("sqlite: get sandbox sb-1: ...").
#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "store/sql_driver.h"

namespace vessel::store {

inline void bindArg(SqlStatement& s, const std::string& v) { s.bindText(v); }
inline void bindArg(SqlStatement& s, std::string_view v) { s.bindText(v); }
inline void bindArg(SqlStatement& s, const char* v) { s.bindText(v); }
template <std::integral T>
void bindArg(SqlStatement& s, T v) {
  s.bindInt(static_cast<int64_t>(v));
}
inline void bindArg(SqlStatement& s, const std::optional<int64_t>& v) {
  if (v)
    s.bindInt(*v);
  else
    s.bindNull();
}

// One store call's statements: rendered for the driver's dialect, their
// parameters bound in order, errors prefixed with the engine and what the
// call was doing ("sqlite: get sandbox sb-1: ...").
class Sql {
 public:
  Sql(SqlDriver& d, std::string_view what) : d_(d), what_(what) {}
  Dialect dialect() const { return d_.dialect(); }
  Error fail(Error e) const { return std::move(e).withContext(what_).withContext(d_.name()); }

  // Runs a statement to its end; returns how many rows it changed.
  template <typename... A>
  Result<int64_t> exec(std::string_view sql, const A&... args) {
    VESSEL_ASSIGN_OR_RETURN(auto st, bound(sql, args...));
    for (;;) {
      VESSEL_ASSIGN_OR_RETURN(bool row, step(*st));
      if (!row) return st->changes();
    }
  }
  // Every row, each read by `read` (a function of an SqlRow).
  template <typename Read, typename... A>
  auto all(Read read, std::string_view sql, const A&... args)
      -> Result<std::vector<std::invoke_result_t<Read, const SqlRow&>>> {
    VESSEL_ASSIGN_OR_RETURN(auto st, bound(sql, args...));
    std::vector<std::invoke_result_t<Read, const SqlRow&>> out;
    for (;;) {
      VESSEL_ASSIGN_OR_RETURN(bool row, step(*st));
      if (!row) return out;
      out.push_back(read(*st));
    }
  }
  // The first row, if any.
  template <typename Read, typename... A>
  auto one(Read read, std::string_view sql, const A&... args)
      -> Result<std::optional<std::invoke_result_t<Read, const SqlRow&>>> {
    VESSEL_ASSIGN_OR_RETURN(auto st, bound(sql, args...));
    std::optional<std::invoke_result_t<Read, const SqlRow&>> out;
    for (;;) {  // to the end: a write's RETURNING row is read before it completes
      VESSEL_ASSIGN_OR_RETURN(bool row, step(*st));
      if (!row) return out;
      if (!out) out = read(*st);
    }
  }
  Status script(std::string_view sql) {
    if (auto s = d_.execScript(renderSql(d_.dialect(), sql)); !s.ok())
      return fail(std::move(s).error());
    return okStatus();
  }
  // Runs `body` in a transaction: committed when it returns no Error,
  // else rolled back.
  template <typename F>
  auto transaction(F&& body) -> decltype(body()) {
    if (auto b = d_.begin(); !b.ok()) return fail(std::move(b).error());
    auto r = body();
    if (!r.ok()) {
      d_.rollback();
      return r;
    }
    if (auto c = d_.commit(); !c.ok()) {
      d_.rollback();
      return fail(std::move(c).error());
    }
    return r;
  }

 private:
  template <typename... A>
  Result<std::unique_ptr<SqlStatement>> bound(std::string_view sql, const A&... args) {
    auto st = d_.prepare(renderSql(d_.dialect(), sql));
    if (!st.ok()) return fail(std::move(st).error());
    (bindArg(**st, args), ...);
    return st;
  }
  Result<bool> step(SqlStatement& st) {
    auto r = st.step();
    if (!r.ok()) return fail(std::move(r).error());
    return r;
  }

  SqlDriver& d_;
  const std::string_view what_;
};

}  // namespace vessel::store
