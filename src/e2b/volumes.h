#pragma once
// The volumes E2B's Volume API reaches (docs/e2b.md, "Volumes"): the
// tenant's own Vessel volumes, through functions vesseld hands in
// (api::VolumesApi's, so the same records, quota, images and confined file
// code as /v1/volumes: src/e2b reaches no api/). E2B names a volume by its
// id (`volumeID`), Vessel's API by its name.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "e2b/volume_requests.h"
#include "store/store.h"
#include "volumes/files.h"

namespace vessel::e2b {

struct Volumes {
  // Makes the tenant's volume `name` (E2B gives no size: the deployment's
  // --e2b-volume-mib); kAlreadyExists for a name it has.
  std::function<boost::asio::awaitable<Result<store::VolumeRecord>>(std::string tenant,
                                                                    std::string name)>
      create;
  // The tenant's volumes, by name.
  std::function<Result<std::vector<store::VolumeRecord>>(const std::string& tenant)> list;
  // Deletes it: kFailedPrecondition while a sandbox mounts it.
  std::function<boost::asio::awaitable<Status>(std::string tenant, std::string name)> remove;
  // Its files, beneath its root (volumes/files.h); blocking calls on `pool`.
  std::function<Result<volumes::VolumeFiles>(const std::string& tenant, const std::string& name)>
      files;
  boost::asio::thread_pool* pool = nullptr;
  // The tenant's sandboxes' mounts: sandbox id -> its volumes' names and paths.
  std::function<Result<std::map<std::string, std::vector<VolumeMount>>>(const std::string& tenant)>
      mounts;
  // The largest upload (a volume's largest size).
  uint64_t max_file_bytes = 0;
};

}  // namespace vessel::e2b
