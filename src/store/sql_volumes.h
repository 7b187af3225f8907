#pragma once
// The volumes' statements (store migrations 16 and 17, docs/volumes.md),
// for the SQL store (sql_store.cc) to run inside its calls: written once
// for both engines.
#include <optional>
#include <string>
#include <vector>

#include "store/sql.h"
#include "store/store.h"

namespace vessel::store {

Status insertVolume(Sql& q, const VolumeRecord& v, int64_t max_total_mib);
Result<std::optional<VolumeRecord>> getVolume(Sql& q, const std::string& tenant_id,
                                              const std::string& name);
Result<std::vector<VolumeRecord>> listVolumes(Sql& q, const std::string& tenant_id);
Result<std::vector<VolumeRecord>> listNodeVolumes(Sql& q, const std::string& node);
Result<VolumeRecord> deleteVolume(Sql& q, const std::string& tenant_id, const std::string& name,
                                  bool force);
Status insertVolumeMount(Sql& q, const VolumeMountRecord& m);
Result<std::vector<VolumeMountRecord>> listVolumeMounts(Sql& q, const std::string& volume_id);
Status setTemplateVolumes(Sql& q, const std::string& tenant_id, const std::string& template_name,
                          const std::vector<TemplateVolumeRecord>& v);
Result<std::vector<TemplateVolumeRecord>> listTemplateVolumes(Sql& q, const std::string& tenant_id,
                                                              const std::string& template_name);
Result<std::vector<VolumeMountRecord>> listSandboxVolumeMounts(Sql& q,
                                                               const std::string& sandbox_id);
Result<int> deleteSandboxVolumeMounts(Sql& q, const std::string& sandbox_id);

}  // namespace vessel::store
