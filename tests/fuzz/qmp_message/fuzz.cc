// Fuzzes the QMP line parser: any bytes must yield a message or an Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hypervisor/qemu/qmp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto m = vessel::hypervisor::qemu::parseQmpMessage(in);
  if (m.ok() && m->kind == vessel::hypervisor::qemu::QmpMessage::Kind::kError)
    (void)m->error_desc.size();
  return 0;
}
