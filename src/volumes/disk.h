#pragma once
// A volume on the host (docs/design.md, "Volumes"): a sparse raw ext4
// image made by mkfs.ext4, attached to a loop device and mounted by
// vesseld with nosuid,nodev,noexec. Only the host kernel ever writes the
// image's metadata; guests reach its files through a confined file server
// (a later slice), never the image itself.
//
// Kernel objects are owned: a MountedImage unmounts in its destructor, and
// its loop device is attached with LO_FLAGS_AUTOCLEAR, so the kernel
// detaches it when the mount goes (or when the attaching process dies
// before mounting). A mount a killed vesseld left in place is found by its
// loop device's backing file and adopted, never mounted twice.
#include <cstdint>
#include <string>

#include "base/fd.h"
#include "base/result.h"

namespace vessel::volumes {

// Makes `path` (which must not exist; mode 0600) a sparse file of
// `size_mib` MiB holding an empty ext4: journal kept, no reserved blocks
// (-m 0), its root directory owned 0:0 with mode 0755. `mkfs`: the
// mkfs.ext4 binary. Nothing is left behind on failure.
Status makeImage(const std::string& mkfs, const std::string& path, uint64_t size_mib);

// Writes to a mounted filesystem held still (FIFREEZE) until it goes
// (FITHAW): whatever happens in between, the filesystem is thawed.
class FrozenFs {
 public:
  static Result<FrozenFs> freeze(const std::string& mount_dir);
  FrozenFs(FrozenFs&& o) noexcept = default;
  FrozenFs& operator=(FrozenFs&&) = delete;
  FrozenFs(const FrozenFs&) = delete;
  ~FrozenFs();

 private:
  explicit FrozenFs(Fd dir) : dir_(std::move(dir)) {}
  Fd dir_;
};

// Bytes of a mounted filesystem, as statfs counts them (ext4's own
// metadata, the journal included, counts as used).
struct FsUsage {
  uint64_t total_bytes = 0, used_bytes = 0, free_bytes = 0;
};
Result<FsUsage> fsUsage(const std::string& mount_dir);

class MountedImage {
 public:
  // Mounts `image` at `dir` (made if missing) through a loop device, or
  // adopts the mount of that image already at `dir`. Another filesystem
  // at `dir` is kFailedPrecondition. Read-only: the loop device and the
  // mount are both read-only.
  static Result<MountedImage> mount(const std::string& image, const std::string& dir,
                                    bool read_only);
  MountedImage(MountedImage&& o) noexcept;
  MountedImage& operator=(MountedImage&& o) noexcept;
  MountedImage(const MountedImage&) = delete;
  MountedImage& operator=(const MountedImage&) = delete;
  // Unmounts (lazily if something still holds it open).
  ~MountedImage();

  const std::string& dir() const { return dir_; }
  const std::string& image() const { return image_; }
  bool readOnly() const { return read_only_; }
  // Whether mount() found it mounted already (a vesseld killed with it).
  bool adopted() const { return adopted_; }
  // Unmounts now, saying why it could not; then the destructor does nothing.
  Status unmount();

 private:
  MountedImage(std::string image, std::string dir, bool read_only, bool adopted)
      : image_(std::move(image)), dir_(std::move(dir)), read_only_(read_only), adopted_(adopted) {}
  std::string image_, dir_;
  bool read_only_ = false, adopted_ = false;
};

// The loop device (its /sys/dev/block name, "7:3") of the filesystem
// mounted at `dir`, if one is mounted exactly there; "" for none.
Result<std::string> mountedDevice(const std::string& dir);
// The backing file of loop device `dev` ("7:3"), "" when it has none.
std::string loopBackingFile(const std::string& dev);

}  // namespace vessel::volumes
