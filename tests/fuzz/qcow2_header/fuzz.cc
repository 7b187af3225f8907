// Fuzzes the qcow2 header parser: any bytes (the start of an overlay a
// jailed QEMU rewrote) must yield a header or an Error, and an accepted
// header never names a protocol, a NUL or an over-long backing file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "hypervisor/qemu/qcow2_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace q = vessel::hypervisor::qemu;
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto h = q::parseQcow2Header(in);
  if (!h.ok()) return 0;
  const std::string& b = h->backing_file;
  size_t p = b.find_first_of(":/");
  if (b.size() > q::kQcow2MaxBackingName || b.find('\0') != std::string::npos ||
      (p != std::string::npos && b[p] == ':') || h->backing_format.size() > 15 ||
      (h->version != 2 && h->version != 3) || (h->incompatible_features & 0x6) != 0)
    std::abort();
  return 0;
}
