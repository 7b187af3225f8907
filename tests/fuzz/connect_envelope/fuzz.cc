// Fuzzes the Connect envelope decoder (E2B envd streams): the input fed in
// irregular pieces, and as a server-streaming call's whole request body.
// Every input must end in envelopes or an Error, never a crash, a hang or
// unbounded buffering.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "e2b/envd/connect.h"

using namespace vessel::e2b::envd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)singleRequestMessage(in);
  EnvelopeDecoder d(1 << 12);
  size_t step = size ? (data[0] % 7) + 1 : 1;
  for (size_t off = 0; off < in.size(); off += step) {
    if (!d.feed(in.substr(off, step)).ok()) return 0;
    for (;;) {
      auto e = d.next();
      if (!e.ok() || !*e) break;
      if ((*e)->data.size() > (1 << 12)) __builtin_trap();
    }
    if (d.buffered() > (1 << 12) + 5 + (1 << 16)) __builtin_trap();
  }
  return 0;
}
