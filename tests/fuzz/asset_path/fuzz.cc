// The path a browser asks for below the web console's prefix
// (http/asset_path.h): whatever the bytes, an accepted path is relative,
// within the depth, made of the allowed characters only, with no empty,
// dot-led or encoded segment; and every name has a non-empty Content-Type.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http/asset_path.h"

using namespace vessel::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view rel(reinterpret_cast<const char*>(data), size);
  if (contentTypeFor(rel).empty()) __builtin_trap();
  for (size_t depth : {size_t{1}, size_t{3}}) {
    if (!checkAssetPath(rel, depth).ok()) continue;
    size_t segments = 1;
    bool start = true;
    for (char c : rel) {
      bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      if (c == '/') {
        if (start) __builtin_trap();  // an empty segment
        ++segments;
        start = true;
        continue;
      }
      if (!alnum && c != '_' && c != '-' && !(c == '.' && !start)) __builtin_trap();
      start = false;
    }
    if (start || segments > depth || rel.size() > 255) __builtin_trap();
  }
  return 0;
}
