#pragma once
// What differs between the store's two SQL engines, in one place. The
// schema (migrations.cc) and the queries (sql_store.cc) are written once,
// in SQL both engines accept; the few spots where SQLite and PostgreSQL
// differ are tokens rendered here, and the statements only one engine
// needs are the hooks below. The drivers (sql_driver.h) know no SQL.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vessel::store {

enum class Dialect { kSqlite, kPostgres };

// Renders SQL written once for `d`:
//   ?             a parameter, bound in order: SQLite's ?, PostgreSQL's $1, $2, ...
//   {i64}         a 64-bit integer column: SQLite INTEGER, PostgreSQL BIGINT
//                 (its INTEGER is 32 bits: millisecond timestamps overflow it)
//   {seq}         an increasing 64-bit key the database assigns: SQLite's
//                 AUTOINCREMENT rowid, a PostgreSQL identity column
//   {greatest}    the larger of its arguments: SQLite max(), PostgreSQL GREATEST()
//   {for_update}  locks the rows read until the transaction ends: PostgreSQL
//                 FOR UPDATE; nothing on SQLite, whose write transaction
//                 (BEGIN IMMEDIATE) holds the whole database already
// A ? inside a quoted literal is left alone.
std::string renderSql(Dialect d, std::string_view sql);

// The statements only one engine needs, run inside the transaction named.
struct DialectHooks {
  // First in the migration's transaction: replicas starting together
  // migrate once, one after the other (PostgreSQL: an advisory lock; SQLite:
  // none, BEGIN IMMEDIATE is the lock).
  std::vector<std::string> migration_lock;
  // SQLite databases from before schema_migrations counted their
  // migrations (1..N applied) in user_version: read at migration and kept
  // up to date ({n}: the newest applied). Empty on PostgreSQL.
  std::string legacy_version_get, legacy_version_set;
  // First in appendEvent's transaction, bound (kEventLockClass, tenant id):
  // a tenant's sequence numbers become visible in increasing order. Empty
  // on SQLite, whose one writer at a time commits them in order anyway.
  std::string sequence_lock;
  // 1 when schema_migrations exists: a node's role (store/node_roles.h) may
  // not create tables, even with IF NOT EXISTS, so it is created only when
  // missing.
  std::string has_migrations_table;
};
const DialectHooks& hooks(Dialect d);

// The event sequence lock's class (see sequence_lock): a key space apart
// from the one-number advisory keys (the migration's).
constexpr int64_t kEventLockClass = 0x7665'7302;

}  // namespace vessel::store
