#pragma once
// The durable store behind vesseld. One interface, two engines: SQLite
// (embedded, single node, the default) and PostgreSQL (many nodes, later).
// Schema changes are numbered migrations applied in order at open.
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"

namespace vessel::store {

class Store {
 public:
  virtual ~Store() = default;
  virtual std::string_view engine() const = 0;
  virtual int schemaVersion() const = 0;
  // Small key/value facts about this deployment (instance id, ...).
  virtual Result<std::optional<std::string>> getMeta(const std::string& key) = 0;
  virtual Status setMeta(const std::string& key, const std::string& value) = 0;
};

// Opens (creating if needed) the SQLite database at `path` in WAL mode and
// migrates it to the newest schema. Refuses a database whose schema is newer
// than this binary knows.
Result<std::unique_ptr<Store>> openSqlite(const std::string& path);

}  // namespace vessel::store
