#pragma once
// The host-side steps between an unpacked image and its ext4 image. The
// unpacked tree is the image's, i.e. a tenant's: every path into it is
// resolved inside it (openat2 RESOLVE_IN_ROOT), never through its symlinks
// onto the host's own files.
#include <cstdint>
#include <string>

#include "base/result.h"

namespace vessel::images {

// Writes `agent` (a host file) as <rootfs>/sbin/vessel-agent, mode 0755,
// owned by root, replacing what the image had there.
Status installAgent(const std::string& rootfs, const std::string& agent);

struct TreeSize {
  uint64_t bytes = 0;    // data blocks the files take (4 KiB blocks)
  uint64_t entries = 0;  // inodes
};
// Walks the tree without following symlinks; refuses more than
// `max_entries` entries.
Result<TreeSize> measureTree(const std::string& root, uint64_t max_entries = 4u << 20);

// mkfs.ext4 -d: a sparse image at `out` holding `root`, sized for `size`
// with room to spare (sandboxes grow it to their disk_mib).
Status makeExt4(const std::string& mkfs, const std::string& root, const TreeSize& size,
                const std::string& out);

}  // namespace vessel::images
