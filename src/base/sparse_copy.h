#pragma once
// A file copied without filling its holes: disk images are mostly holes
// (a 2 GiB ext4 image may hold 100 MiB), and a copy that writes the zeros
// costs seconds and the host's disk. A reflink where the filesystem shares
// blocks (btrfs, xfs), else data extents found with SEEK_DATA/SEEK_HOLE
// and moved in the kernel with copy_file_range.
#include <cstdint>
#include <string>

#include "base/result.h"

namespace vessel {

// Copies `from` to `to` (created or truncated, with `mode`), fsynced.
// Nothing is parsed: the bytes are copied as they are, so a file a guest
// wrote may be copied by the host. More than `max_data_bytes` of data (a
// file its writer grows while it is copied) is kResourceExhausted.
Status copySparse(const std::string& from, const std::string& to, int mode = 0600,
                  uint64_t max_data_bytes = UINT64_MAX);

}  // namespace vessel
