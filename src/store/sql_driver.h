#pragma once
// The thin layer under the SQL store (sql_store.cc): one connection to one
// engine, statements prepared, bound, stepped and read by column, and
// transactions. A driver knows nothing of the schema or of the dialect
// (sql_dialect.h renders the SQL it is given); it maps its engine's errors
// onto the store's codes:
//   kAlreadyExists       a unique key is taken (SQLite: any constraint)
//   kFailedPrecondition  another constraint (a foreign key; PostgreSQL)
//   kUnavailable         anything else; a broken connection is made again
//                        by the next connect()
// Errors carry the engine's own message only; the store adds what it was
// doing and which engine. Not thread-safe: the store serializes its calls.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/result.h"
#include "store/sql_dialect.h"

namespace vessel::store {

// The current row of a statement, read by column (0-based). NULL reads as
// "" or 0.
class SqlRow {
 public:
  virtual ~SqlRow() = default;
  virtual std::string text(int col) const = 0;
  virtual int64_t integer(int col) const = 0;
  virtual bool isNull(int col) const = 0;
};

// A prepared statement: parameters bound in order, then step() until false.
class SqlStatement : public SqlRow {
 public:
  virtual void bindText(std::string_view v) = 0;
  virtual void bindInt(int64_t v) = 0;
  virtual void bindNull() = 0;
  // Runs the statement (on the first call) and moves to the next row: true
  // while there is one.
  virtual Result<bool> step() = 0;
  // Rows inserted, updated or deleted, once step() has returned false.
  virtual int64_t changes() const = 0;
};

class SqlDriver {
 public:
  virtual ~SqlDriver() = default;
  virtual Dialect dialect() const = 0;
  // "sqlite", or "postgres <url without its password>": the prefix of errors.
  virtual const std::string& name() const = 0;
  // Called before every store call: makes a connection that broke (or was
  // never made) again. Never inside a transaction.
  virtual Status connect() = 0;
  virtual Result<std::unique_ptr<SqlStatement>> prepare(const std::string& sql) = 0;
  // Statements without parameters, several separated by ';' (migrations).
  virtual Status execScript(const std::string& sql) = 0;
  // A transaction on the connection, for the statements until commit() or
  // rollback(); they do not nest. Every store transaction writes, so
  // SQLite takes the write lock at begin (BEGIN IMMEDIATE).
  virtual Status begin() = 0;
  virtual Status commit() = 0;
  virtual void rollback() = 0;
};

// SQLite at `path` (created if absent) in WAL mode with foreign keys on.
Result<std::unique_ptr<SqlDriver>> openSqliteDriver(const std::string& path);
// PostgreSQL at `conninfo`, connected on first use; `shown` names it in
// errors (without its password).
std::unique_ptr<SqlDriver> postgresDriver(std::string conninfo, std::string shown);

}  // namespace vessel::store
