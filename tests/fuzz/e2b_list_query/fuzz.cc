// The E2B list query (GET /sandboxes, /v2/sandboxes): any request target
// parses to a bounded ListQuery or an Error, never a crash or an unbounded
// loop, in both generations.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "e2b/requests.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view target(reinterpret_cast<const char*>(data), size);  // SAFETY: read-only bytes
  for (bool v2 : {false, true}) {
    auto q = vessel::e2b::parseListQuery(target, v2);
    if (q.ok() && (q->limit < 1 || q->limit > 100 || q->metadata.size() > 32 || q->states.empty()))
      __builtin_trap();
  }
  return 0;
}
