#include "store/sql_volumes.h"

#include "store/sql_records.h"

namespace vessel::store {

namespace {

constexpr std::string_view kVolumeCols =
    "id,tenant_id,name,size_mib,read_only,source_id,node,created_ms";

VolumeRecord readVolume(const SqlRow& r) {
  VolumeRecord v;
  v.id = r.text(0);
  v.tenant_id = r.text(1);
  v.name = r.text(2);
  v.size_mib = static_cast<uint64_t>(r.integer(3));
  v.read_only = r.integer(4) != 0;
  v.source_id = r.text(5);
  v.node = r.text(6);
  v.created_ms = r.integer(7);
  return v;
}

VolumeMountRecord readMount(const SqlRow& r) {
  VolumeMountRecord m;
  m.sandbox_id = r.text(0);
  m.volume_id = r.text(1);
  m.path = r.text(2);
  m.read_only = r.integer(3) != 0;
  return m;
}

const std::string kSelect = "SELECT " + std::string(kVolumeCols) + " FROM volumes";

}  // namespace

Status insertVolume(Sql& q, const VolumeRecord& v, int64_t max_total_mib) {
  return q.transaction([&]() -> Status {
    // The tenant's row {for_update} first, as insertSandboxAdmitted: one
    // tenant's volume creates are serialized, so two replicas cannot both
    // take the last of its quota.
    VESSEL_ASSIGN_OR_RETURN(
        auto tenant, q.one(text0, "SELECT id FROM tenants WHERE id=?{for_update}", v.tenant_id));
    if (!tenant) return Error(Code::kNotFound, "tenant " + v.tenant_id + " does not exist");
    if (max_total_mib >= 0) {
      VESSEL_ASSIGN_OR_RETURN(auto used,
                              q.one(int0,
                                    "SELECT CAST(coalesce(sum(size_mib),0) AS BIGINT) FROM volumes"
                                    " WHERE tenant_id=?",
                                    v.tenant_id));
      const int64_t total = used.value_or(0) + static_cast<int64_t>(v.size_mib);
      if (total > max_total_mib)
        return Error(Code::kResourceExhausted,
                     "tenant volume quota: " + std::to_string(used.value_or(0)) + " MiB used + " +
                         std::to_string(v.size_mib) + " MiB > " + std::to_string(max_total_mib) +
                         " MiB (--tenant-max-volume-mib)");
    }
    auto ins =
        q.exec("INSERT INTO volumes(" + std::string(kVolumeCols) + ") VALUES(?,?,?,?,?,?,?,?)",
               v.id, v.tenant_id, v.name, static_cast<int64_t>(v.size_mib), v.read_only ? 1 : 0,
               v.source_id, v.node, v.created_ms);
    if (!ins.ok() && ins.error().code() == Code::kAlreadyExists)
      return Error(Code::kAlreadyExists, "volume " + v.name + " exists");
    if (!ins.ok()) return std::move(ins).error();
    return okStatus();
  });
}

Result<std::optional<VolumeRecord>> getVolume(Sql& q, const std::string& tenant_id,
                                              const std::string& name) {
  return q.one(readVolume, kSelect + " WHERE tenant_id=? AND name=?", tenant_id, name);
}

Result<std::vector<VolumeRecord>> listVolumes(Sql& q, const std::string& tenant_id) {
  return q.all(readVolume, kSelect + " WHERE tenant_id=? ORDER BY name", tenant_id);
}

Result<std::vector<VolumeRecord>> listNodeVolumes(Sql& q, const std::string& node) {
  return q.all(readVolume, kSelect + " WHERE node=? ORDER BY id", node);
}

Result<VolumeRecord> deleteVolume(Sql& q, const std::string& tenant_id, const std::string& name,
                                  bool force) {
  return q.transaction([&]() -> Result<VolumeRecord> {
    VESSEL_ASSIGN_OR_RETURN(
        auto v,
        q.one(readVolume, kSelect + " WHERE tenant_id=? AND name=?{for_update}", tenant_id, name));
    if (!v) return Error(Code::kNotFound, "volume " + name + " does not exist");
    VESSEL_ASSIGN_OR_RETURN(
        auto mounts, q.one(int0, "SELECT count(*) FROM volume_mounts WHERE volume_id=?", v->id));
    if (mounts.value_or(0) > 0 && !force)
      return Error(Code::kFailedPrecondition, "volume " + name + " is mounted by " +
                                                  std::to_string(*mounts) +
                                                  " sandbox(es); delete them first, or force=true");
    VESSEL_TRY(q.exec("DELETE FROM volume_mounts WHERE volume_id=?", v->id));
    VESSEL_TRY(q.exec("DELETE FROM volumes WHERE id=?", v->id));
    return std::move(*v);
  });
}

Status insertVolumeMount(Sql& q, const VolumeMountRecord& m) {
  VESSEL_TRY(
      q.exec("INSERT INTO volume_mounts(sandbox_id,volume_id,path,read_only)"
             " VALUES(?,?,?,?)",
             m.sandbox_id, m.volume_id, m.path, m.read_only ? 1 : 0));
  return okStatus();
}

Result<std::vector<VolumeMountRecord>> listVolumeMounts(Sql& q, const std::string& volume_id) {
  return q.all(readMount,
               "SELECT sandbox_id,volume_id,path,read_only FROM volume_mounts WHERE volume_id=?"
               " ORDER BY sandbox_id, path",
               volume_id);
}

Status setTemplateVolumes(Sql& q, const std::string& tenant_id, const std::string& template_name,
                          const std::vector<TemplateVolumeRecord>& v) {
  return q.transaction([&]() -> Status {
    VESSEL_TRY(q.exec("DELETE FROM template_volumes WHERE tenant_id=? AND template=?", tenant_id,
                      template_name));
    for (const auto& t : v)
      VESSEL_TRY(
          q.exec("INSERT INTO template_volumes(tenant_id,template,name,path,read_only)"
                 " VALUES(?,?,?,?,?)",
                 tenant_id, template_name, t.name, t.path, t.read_only ? 1 : 0));
    return okStatus();
  });
}

Result<std::vector<TemplateVolumeRecord>> listTemplateVolumes(Sql& q, const std::string& tenant_id,
                                                              const std::string& template_name) {
  auto read = [](const SqlRow& r) {
    TemplateVolumeRecord t;
    t.tenant_id = r.text(0);
    t.template_name = r.text(1);
    t.name = r.text(2);
    t.path = r.text(3);
    t.read_only = r.integer(4) != 0;
    return t;
  };
  return q.all(read,
               "SELECT tenant_id,template,name,path,read_only FROM template_volumes"
               " WHERE tenant_id=? AND template=? ORDER BY path",
               tenant_id, template_name);
}

Result<std::vector<VolumeMountRecord>> listSandboxVolumeMounts(Sql& q,
                                                               const std::string& sandbox_id) {
  return q.all(readMount,
               "SELECT sandbox_id,volume_id,path,read_only FROM volume_mounts WHERE sandbox_id=?"
               " ORDER BY path",
               sandbox_id);
}

Result<int> deleteSandboxVolumeMounts(Sql& q, const std::string& sandbox_id) {
  VESSEL_ASSIGN_OR_RETURN(int64_t n,
                          q.exec("DELETE FROM volume_mounts WHERE sandbox_id=?", sandbox_id));
  return static_cast<int>(n);
}

}  // namespace vessel::store
