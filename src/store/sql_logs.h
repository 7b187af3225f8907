#pragma once
// The sandbox log's statements (store migration 12), for the SQL store
// (sql_store.cc) to run inside its calls: written once for both engines.
#include <string>
#include <vector>

#include "store/sql.h"
#include "store/store.h"

namespace vessel::store {

// The log lock's class (sql_dialect.h's sequence_lock, keyed by sandbox
// id): a key space apart from the events' and the migration's.
constexpr int64_t kLogLockClass = 0x7665'7303;

Result<int64_t> appendLog(Sql& q, const LogRecord& r, int64_t now_ms);
Result<std::vector<LogRecord>> listLogs(Sql& q, const std::string& tenant_id,
                                        const std::string& sandbox_id, const LogQuery& lq);
Result<int> trimLogs(Sql& q, const std::string& sandbox_id, int keep);
Result<int> collectLogs(Sql& q, int64_t ended_before_ms);

}  // namespace vessel::store
