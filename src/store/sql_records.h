#pragma once
// How each store record maps onto its table: its columns in one order
// (the *Cols lists, which SELECTs and INSERTs name), the reader of a row
// in that order, and the writer of a new row. Adding a column touches the
// migration (migrations.cc), the record (store.h) and its reader and
// writer here.
#include <string>
#include <string_view>

#include "store/sql.h"
#include "store/store.h"

namespace vessel::store {

inline constexpr std::string_view kSandboxCols =
    "id,tenant_id,template,state,error,vcpus,memory_mib,metadata,created_ms,updated_ms,"
    "idle_timeout_s,expires_ms,last_active_ms,disk_mib,node,on_timeout,pause_memory,auto_resume,"
    "lifetime_s";
inline constexpr std::string_view kOperationCols =
    "id,tenant_id,sandbox_id,kind,state,error_code,error_message,created_ms,updated_ms,owner";
inline constexpr std::string_view kLimitCols =
    "max_sandboxes, max_memory_mib, max_vcpus, max_disk_mib";
// Sandboxes not deleted or failed, the memory and vCPUs of those holding
// a VM, and their disks plus paused ones' memory (TenantUsage), bound to
// the tenant id.
inline constexpr std::string_view kUsageSql =
    "SELECT count(*),"
    " CAST(coalesce(sum(CASE WHEN state!='paused' THEN memory_mib ELSE 0 END),0) AS BIGINT),"
    " CAST(coalesce(sum(CASE WHEN state!='paused' THEN vcpus ELSE 0 END),0) AS BIGINT),"
    " CAST(coalesce(sum(disk_mib + CASE WHEN state='paused' THEN memory_mib ELSE 0 END),0)"
    " AS BIGINT) FROM sandboxes WHERE tenant_id=? AND state NOT IN ('deleted','failed')";
inline constexpr std::string_view kCredentialCols = "tenant_id,name,hosts,header,value,created_ms";
inline constexpr std::string_view kNodeCols =
    "name,advertise_url,data_url,memory_mib,memory_free_mib,vcpus,sandboxes,templates,accel,"
    "state,registered_ms,heartbeat_ms,envd_url,volume_free_mib";
inline constexpr std::string_view kTemplateCols =
    "name,version,tenant_id,manifest,sizes,created_at,registered_ms,deleted_ms";

std::string text0(const SqlRow& r);
int64_t int0(const SqlRow& r);
// A row of sandboxesWhere: kSandboxCols, then its ingress settings.
SandboxRecord readSandbox(const SqlRow& r);
// An object of strings (a sandbox's metadata) as stored, and back; what is
// not one reads as empty, a value that is not a string is left out.
std::map<std::string, std::string> readStringMap(std::string_view text);
std::string stringMapJson(const std::map<std::string, std::string>& m);
// Stored ingress settings; unreadable ones are private ports.
IngressSettings readIngress(std::string_view text);
// Stored network settings (nullopt: none stored); corrupt ones kInternal.
Result<std::optional<NetworkSettings>> readNetwork(const std::optional<std::string>& text,
                                                   const std::string& sandbox_id);
OperationRecord readOperation(const SqlRow& r);
TenantLimits readLimits(const SqlRow& r);
TenantUsage readUsage(const SqlRow& r);
EventRecord readEvent(const SqlRow& r);  // seq,tenant_id,operation_id,sandbox_id,type,data,at_ms
SessionRecord readSession(
    const SqlRow& r);  // token_sha256,tenant_id,sandbox_id,created_ms,expires_ms
// A credential whose stored host list is unreadable is an Error (kInternal):
// read as "no hosts" it would serve every host.
Result<CredentialRecord> readCredential(const SqlRow& r);
// A list of strings as stored, and back (what is not one reads as empty).
std::vector<std::string> readStringList(std::string_view text);
std::string stringListJson(const std::vector<std::string>& v);
NodeRecord readNode(const SqlRow& r);
TemplateRecord readTemplate(const SqlRow& r);

// SELECT of every column of sandboxes (operations), then `rest` (WHERE ...).
std::string sandboxesWhere(std::string_view rest);
std::string operationsWhere(std::string_view rest);

// Writers of a new row. insertSandbox writes its ingress settings too, and
// belongs in a transaction.
Status insertSandbox(Sql& q, const SandboxRecord& r);
Status insertOperation(Sql& q, const OperationRecord& o);

}  // namespace vessel::store
