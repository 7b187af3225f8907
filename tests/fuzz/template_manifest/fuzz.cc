// A template's manifest.json (read before every restore, and from a
// template directory that may have been copied in): any bytes parse to a
// bounded Manifest or an Error, and a manifest that parses is written back
// (toJson) to one that parses to the same thing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "templates/manifest.h"

using vessel::templates::Manifest;

namespace {

bool same(const Manifest& a, const Manifest& b) {
  return a.format == b.format && a.name == b.name && a.version == b.version &&
         a.spec_hash == b.spec_hash && a.qemu_version == b.qemu_version &&
         a.kernel_sha256 == b.kernel_sha256 && a.cmdline == b.cmdline && a.vcpus == b.vcpus &&
         a.memory_mib == b.memory_mib && a.network == b.network && a.created_at == b.created_at &&
         a.files == b.files;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto m = vessel::templates::parseManifest(in);
  if (!m.ok()) return 0;
  if (m->files.size() > 16 || m->vcpus < 1 || m->vcpus > 64) __builtin_trap();
  for (const auto& [name, sum] : m->files)
    if (name.empty() || name.find('/') != std::string::npos || name[0] == '.' || sum.size() != 64)
      __builtin_trap();
  auto again = vessel::templates::parseManifest(vessel::templates::toJson(*m));
  if (!again.ok() || !same(*m, *again)) __builtin_trap();
  return 0;
}
