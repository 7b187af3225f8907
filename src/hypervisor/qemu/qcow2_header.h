#pragma once
// The header of a qcow2 image, read by vesseld before any QEMU or qemu-img
// opens a sandbox's overlay. The overlay is the one file a jailed QEMU (and
// so a guest that took it over) can rewrite, and its header decides what
// else QEMU opens: a backing file, an external data file, a `json:` or
// `nbd:` pseudo-protocol name, encryption. The parser accepts only what
// vesseld's own overlays use and refuses the rest (docs/threat-model.md).
//
// Bounded: the header, its extensions and the backing name all lie in the
// image's first cluster (at most 2 MiB, cluster_bits 21), as QEMU requires;
// nothing past it is read.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::hypervisor::qemu {

// QEMU's largest cluster: a header region never extends past it.
constexpr size_t kQcow2MaxClusterBytes = size_t{1} << 21;
// QEMU's own limit on a backing file name.
constexpr size_t kQcow2MaxBackingName = 1023;

struct Qcow2Header {
  uint32_t version = 0;  // 2 or 3
  uint32_t cluster_bits = 0;
  uint64_t virtual_size = 0;
  uint64_t incompatible_features = 0;
  uint64_t compatible_features = 0;
  uint64_t autoclear_features = 0;
  std::string backing_file;    // empty: none
  std::string backing_format;  // the backing-format extension; empty: none
};

// Parses the start of an image (its first cluster, or the whole file when
// shorter). Refuses: a bad magic or version; encryption; an external data
// file (feature bit or extension); a header marked corrupt; incompatible or
// autoclear feature bits QEMU 7.2 does not define; any header extension
// other than backing format, feature names and dirty bitmaps; a backing
// name that is too long, has a NUL, or names a protocol (`json:`, `nbd:`,
// anything with a ':' before its first '/').
Result<Qcow2Header> parseQcow2Header(std::string_view bytes);

// Reads the first cluster of the image at `path` (O_NOFOLLOW, a regular
// file) and parses it.
Result<Qcow2Header> readQcow2Header(const std::string& path);

// The image at `path` is a qcow2 overlay backed by exactly `backing` (the
// bytes its header holds, compared whole; a relative or different name is
// refused) of format `backing_format`, or by nothing when `backing` is
// empty; and its virtual size is at most `max_virtual_bytes` (0: any).
Status checkQcow2Overlay(const std::string& path, const std::string& backing,
                         const std::string& backing_format, uint64_t max_virtual_bytes = 0);

}  // namespace vessel::hypervisor::qemu
