// An image's manifest, index and config as a registry sends them (the
// converter, images/image_config.h): any bytes parse within their bounds
// or give an Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "images/image_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto m = vessel::images::parseManifest(in); m.ok()) {
    if (m->index && (!m->layers.empty() || m->platforms.size() > 4096)) __builtin_trap();
    if (!m->index && (m->layers.size() > 4096 || m->config.digest.size() != 71)) __builtin_trap();
    (void)vessel::images::choosePlatform(*m, "amd64");
  }
  if (auto c = vessel::images::parseImageConfig(in); c.ok()) {
    if (c->architecture.empty() || c->env.size() > 4096 || c->user.size() > 64) __builtin_trap();
    if (!c->working_dir.empty() && c->working_dir[0] != '/') __builtin_trap();
  }
  return 0;
}
