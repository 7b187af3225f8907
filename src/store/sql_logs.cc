#include "store/sql_logs.h"

#include <algorithm>

#include "store/sql_records.h"

namespace vessel::store {

namespace {

LogRecord readLog(const SqlRow& s) {
  return {s.integer(0), s.text(1), s.text(2), s.text(3), s.integer(4)};
}

}  // namespace

Result<int64_t> appendLog(Sql& q, const LogRecord& r, int64_t now_ms) {
  auto insert = [&]() -> Result<int64_t> {
    VESSEL_ASSIGN_OR_RETURN(auto seq,
                            q.one(int0,
                                  "INSERT INTO sandbox_logs(sandbox_id,kind,data,at_ms)"
                                  " VALUES(?,?,?,?) RETURNING seq",
                                  r.sandbox_id, r.kind, r.data_json, r.at_ms ? r.at_ms : now_ms));
    if (!seq) return Error(Code::kInternal, "no sequence number");
    return *seq;
  };
  // As appendEvent: the sandbox's sequence lock (PostgreSQL) makes its
  // numbers visible in order; SQLite's one writer does that already.
  const auto& lock = hooks(q.dialect()).sequence_lock;
  if (lock.empty()) return insert();
  return q.transaction([&]() -> Result<int64_t> {
    VESSEL_TRY(q.exec(lock, kLogLockClass, r.sandbox_id));
    return insert();
  });
}

Result<std::vector<LogRecord>> listLogs(Sql& q, const std::string& tenant_id,
                                        const std::string& sandbox_id, const LogQuery& lq) {
  // The join scopes the read to the tenant: another tenant's sandbox has
  // no entries.
  std::string sql =
      "SELECT l.seq,l.sandbox_id,l.kind,l.data,l.at_ms FROM sandbox_logs l"
      " JOIN sandboxes s ON s.id=l.sandbox_id"
      " WHERE s.tenant_id=? AND l.sandbox_id=? AND (CAST(? AS TEXT)='' OR l.kind=?)"
      " AND l.at_ms>=? AND (CAST(? AS BIGINT)=0 OR l.at_ms<=?) AND l.seq>?"
      " ORDER BY l.seq";
  sql += lq.newest_first ? " DESC LIMIT ?" : " LIMIT ?";
  return q.all(readLog, sql, tenant_id, sandbox_id, lq.kind, lq.kind, lq.since_ms, lq.until_ms,
               lq.until_ms, lq.after_seq, std::max(lq.limit, 0));
}

Result<int> trimLogs(Sql& q, const std::string& sandbox_id, int keep) {
  // Everything older than the oldest of the newest `keep`; with fewer
  // entries than that the bound is the oldest, and nothing goes.
  VESSEL_ASSIGN_OR_RETURN(
      int64_t n,
      q.exec("DELETE FROM sandbox_logs WHERE sandbox_id=? AND seq<(SELECT min(seq) FROM"
             " (SELECT seq FROM sandbox_logs WHERE sandbox_id=? ORDER BY seq DESC LIMIT ?)"
             " AS newest)",
             sandbox_id, sandbox_id, std::max(keep, 0)));
  return static_cast<int>(n);
}

Result<int> collectLogs(Sql& q, int64_t ended_before_ms) {
  VESSEL_ASSIGN_OR_RETURN(
      int64_t n, q.exec("DELETE FROM sandbox_logs WHERE sandbox_id IN (SELECT id FROM sandboxes"
                        " WHERE state IN ('deleted','failed') AND updated_ms<?)",
                        ended_before_ms));
  return static_cast<int>(n);
}

}  // namespace vessel::store
