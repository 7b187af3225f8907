#include "store/sql_dialect.h"

namespace vessel::store {

namespace {

struct Token {
  std::string_view name, sqlite, postgres;
};
constexpr Token kTokens[] = {
    {"{i64}", "INTEGER", "BIGINT"},
    {"{seq}", "INTEGER PRIMARY KEY AUTOINCREMENT",
     "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"},
    {"{greatest}", "max", "GREATEST"},
    {"{for_update}", "", " FOR UPDATE"},
};

// PostgreSQL's advisory lock keys are arbitrary constants shared by every
// vesseld on the database: "vessel" 1 is the migration's.
constexpr int64_t kMigrationLock = 0x7665'7373'656c'0001;

}  // namespace

std::string renderSql(Dialect d, std::string_view sql) {
  const bool pg = d == Dialect::kPostgres;
  std::string out;
  out.reserve(sql.size() + 16);
  int param = 0;
  bool quoted = false;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (c == '\'') quoted = !quoted;  // '' inside a literal toggles twice
    if (!quoted && c == '?' && pg) {
      out += '$' + std::to_string(++param);
      continue;
    }
    if (!quoted && c == '{') {
      bool replaced = false;
      for (const auto& t : kTokens)
        if (sql.substr(i, t.name.size()) == t.name) {
          out += pg ? t.postgres : t.sqlite;
          i += t.name.size() - 1;
          replaced = true;
          break;
        }
      if (replaced) continue;
    }
    out += c;
  }
  return out;
}

const DialectHooks& hooks(Dialect d) {
  static const DialectHooks kSqlite{
      {},
      "PRAGMA user_version",
      "PRAGMA user_version={n}",
      "",
      "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_migrations'"};
  static const DialectHooks kPostgres{
      // Migrations may rewrite big tables: no statement timeout while
      // others wait for this one.
      {"SET LOCAL statement_timeout = 0",
       "SELECT pg_advisory_xact_lock(" + std::to_string(kMigrationLock) + ")"},
      "",
      "",
      "SELECT pg_advisory_xact_lock(?, hashtext(?))",
      "SELECT count(*) FROM pg_tables WHERE schemaname=current_schema()"
      " AND tablename='schema_migrations'"};
  return d == Dialect::kPostgres ? kPostgres : kSqlite;
}

}  // namespace vessel::store
