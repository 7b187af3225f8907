#pragma once
// E2B's Volume API over this deployment's volumes (e2b/volumes.h,
// docs/e2b.md "Volumes"): the volumes API's create and delete (placement,
// quota, images: one implementation), the store's records and mounts, and
// on one machine the local keeper's confined files. An API replica keeps
// no files here: its /volumecontent answers 503 in this version.
#include <cstdint>

#include "api/local_volumes.h"
#include "api/volumes_api.h"
#include "e2b/volumes.h"
#include "store/store.h"

namespace vessel::vesseld {

// `local`: this machine's keeper (null on an API replica); `size_mib`:
// the size of a volume E2B makes (--e2b-volume-mib).
e2b::Volumes e2bVolumes(store::Store& store, api::VolumesApi& api, api::LocalVolumes* local,
                        uint64_t size_mib);

}  // namespace vessel::vesseld
