#include "vesseld/e2b_volumes.h"

namespace vessel::vesseld {

namespace asio = boost::asio;

e2b::Volumes e2bVolumes(store::Store& store, api::VolumesApi& api, api::LocalVolumes* local,
                        uint64_t size_mib) {
  e2b::Volumes v;
  v.create = [&api, size_mib](std::string tenant,
                              std::string name) -> asio::awaitable<Result<store::VolumeRecord>> {
    co_return co_await api.createVolume(std::move(tenant), std::move(name), size_mib);
  };
  v.list = [&store](const std::string& tenant) { return store.listVolumes(tenant); };
  // E2B's delete has no force: a mounted volume stays (409), as Vessel's
  // own delete without ?force=true.
  v.remove = [&api](std::string tenant, std::string name) -> asio::awaitable<Status> {
    co_return co_await api.deleteVolume(std::move(tenant), std::move(name), false);
  };
  v.mounts = [&store](const std::string& tenant)
      -> Result<std::map<std::string, std::vector<e2b::VolumeMount>>> {
    std::map<std::string, std::vector<e2b::VolumeMount>> out;
    VESSEL_ASSIGN_OR_RETURN(auto all, store.listVolumes(tenant));
    for (const auto& vol : all) {
      VESSEL_ASSIGN_OR_RETURN(auto mounts, store.listVolumeMounts(vol.id));
      for (const auto& m : mounts) out[m.sandbox_id].push_back({vol.name, m.path});
    }
    return out;
  };
  v.max_file_bytes = api.limits().max_mib << 20;
  if (!local) return v;
  v.files = [&store, local](const std::string& tenant,
                            const std::string& name) -> Result<volumes::VolumeFiles> {
    VESSEL_ASSIGN_OR_RETURN(auto rec, store.getVolume(tenant, name));
    if (!rec) return Error(Code::kNotFound, "volume " + name + " does not exist");
    return local->filesOf(*rec);
  };
  v.pool = &local->filePool();
  return v;
}

}  // namespace vessel::vesseld
