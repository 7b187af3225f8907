// Query strings at the native API's edge: GET /v1/sandboxes (page_size,
// page_token, metadata.KEY filters) and the data plane's parameters. Any
// request target parses to at most 16 known parameters or to an Error, and
// percent-decoding never grows a value.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/resources.h"
#include "http/json_fields.h"

using namespace vessel::api;
using namespace vessel::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view target(reinterpret_cast<const char*>(data), size);
  if (auto q = parseListQuery(target); q.ok()) {
    if (q->page_size < 1 || q->page_size > 100 || q->metadata.size() > 16) __builtin_trap();
    if (!q->page_token.empty() && !validId(q->page_token)) __builtin_trap();
    for (const auto& [k, v] : q->metadata)
      if (k.empty() || k.size() > 63 || v.size() > 1024) __builtin_trap();
  }
  if (auto p = parseQuery(target, {"path", "mode", "recursive", "depth"}); p.ok()) {
    if (p->size() > 16) __builtin_trap();
    for (const auto& [k, v] : *p)
      if (k != "path" && k != "mode" && k != "recursive" && k != "depth") __builtin_trap();
  }
  if (auto d = percentDecode(target); d.ok() && d->size() > target.size()) __builtin_trap();
  return 0;
}
