#pragma once
// The one schema history of the store, for both engines. Each migration is
// written once; the few places where SQLite and PostgreSQL spell a type
// differently are tokens rendered per dialect (sql_dialect.h), so the
// two schemas cannot drift apart.
#include <set>
#include <string>
#include <vector>

#include "base/result.h"
#include "store/sql.h"
#include "store/sql_dialect.h"

namespace vessel::store {

struct Migration {
  int number;
  std::string sql;  // one or more statements, rendered for the dialect
};

// Every known migration in number order, rendered for `d`.
std::vector<Migration> migrations(Dialect d);

// Refuses a database that records a migration this binary does not know
// (it was written by a newer vesseld).
Status checkKnown(const std::set<int>& applied);

// Applies the migrations the database behind `q` lacks, in one transaction
// under the dialect's migration lock (applied_ms = now_ms); returns the
// newest number it then has. Databases from before schema_migrations
// (SQLite's user_version) count as having 1..N.
Result<int> migrateSchema(Sql& q, int64_t now_ms);

}  // namespace vessel::store
