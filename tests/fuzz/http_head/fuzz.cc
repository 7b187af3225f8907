// HTTP request head parser and body tracker.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/http/request_head.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vessel::gateway::http;
  std::string_view in(reinterpret_cast<const char*>(data), size);  // SAFETY: fuzzer bytes
  ParseResult r = parseRequestHead(in);
  if (r.state == ParseResult::State::kDone) {
    if (r.head.head_bytes > in.size()) __builtin_trap();
    // What the gateway forwards must parse to the same authority.
    ParseResult again = parseRequestHead(r.head.serialize());
    if (again.state != ParseResult::State::kDone ||
        again.head.authority.name != r.head.authority.name) {
      __builtin_trap();
    }
    BodyTracker body(r.head);
    size_t used = body.consume(in.substr(r.head.head_bytes));
    if (used > in.size() - r.head.head_bytes) __builtin_trap();
  }
  return 0;
}
