#pragma once
// This machine's volumes (docs/design.md, "Volumes"): one sparse ext4
// image per volume, <dir>/images/<id>.img (0600), loop-mounted at
// <dir>/mnt/<id> while vesseld runs. open() removes the partial copies
// (<id>.img.part) a killed vesseld left. It knows ids and sizes only: names,
// tenants, quotas and which volumes exist are the store's (the API checks
// them first). Every call blocks (mkfs, copies): callers run them off the
// event loop. Thread-safe.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "volumes/disk.h"

namespace vessel::volumes {

struct HostOptions {
  std::string dir;  // <state-dir>/volumes
  std::string mkfs = "mkfs.ext4";
};

// Whether `id` may name a volume's files: [a-z0-9-], 1 to 64 characters.
bool validVolumeId(const std::string& id);

class VolumeHost {
 public:
  static Result<std::unique_ptr<VolumeHost>> open(HostOptions o);
  ~VolumeHost();  // unmounts every volume (their images stay)

  // A new empty volume of `size_mib`, mounted. Nothing is left on failure.
  Status create(const std::string& id, uint64_t size_mib);
  // Mounts an existing volume's image (at vesseld's start), adopting the
  // mount a killed vesseld left; already mounted here is fine.
  Status restore(const std::string& id, bool read_only);
  // A point-in-time copy of mounted volume `from` as volume `to`: `from`
  // frozen (FIFREEZE) while its image is copied sparsely, always thawed;
  // the copy mounted read-only (a snapshot) or writable (a clone).
  Status copy(const std::string& from, const std::string& to, bool read_only);
  // Unmounts the volume and deletes its image and mount directory; a
  // volume with no image is gone already (ok).
  Status remove(const std::string& id);
  // Puts aside the image of a volume the store does not know (a create or
  // delete cut short, or a store restored from before it was made):
  // unmounted, moved to <dir>/orphans/<id>.img for the operator, never
  // deleted.
  Status setAside(const std::string& id);

  // The mounted volume's root directory; kUnavailable when not mounted.
  Result<std::string> root(const std::string& id) const;
  Result<FsUsage> usage(const std::string& id) const;
  // The ids that have an image here (restored or not).
  std::vector<std::string> imageIds() const;

  const std::string& dir() const { return o_.dir; }
  std::string imagePath(const std::string& id) const;
  std::string mountDir(const std::string& id) const;

 private:
  explicit VolumeHost(HostOptions o) : o_(std::move(o)) {}
  Status mountAs(const std::string& id, bool read_only);
  std::shared_ptr<MountedImage> find(const std::string& id) const;

  HostOptions o_;
  mutable std::mutex mu_;  // guards mounts_
  std::map<std::string, std::shared_ptr<MountedImage>> mounts_;
};

}  // namespace vessel::volumes
