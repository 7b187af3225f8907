// The response relay (http/relay.h) over what a guest's port may send. The
// first byte chooses the requests asked (HEAD, upgrade) and how the rest is
// split into reads; properties: whatever is relayed is a prefix of the
// input, the same input is refused or relays the same bytes however it is
// split, and a relay never turns opaque unless an upgrade was asked for.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/relay.h"

namespace {

struct Run {
  bool ok = true;
  bool opaque = false;
  std::string out;
};

Run relay(uint8_t shape, std::string_view in, size_t piece) {
  vessel::http::ResponseRelay r(4096);
  for (int i = 0; i < 4; ++i) r.expect({(shape >> i & 1) != 0, (shape >> (i + 4) & 1) != 0});
  Run run;
  for (size_t at = 0; at < in.size() && run.ok; at += piece) {
    auto s = r.feed(in.substr(at, piece), run.out);
    run.ok = s.ok();
  }
  if (run.ok) (void)r.end();
  run.opaque = r.opaque();
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  uint8_t shape = data[0];
  // SAFETY: fuzzer bytes, read as characters.
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  Run whole = relay(shape, in, in.size() ? in.size() : 1);
  Run bytes = relay(shape, in, 1);
  for (const Run* r : {&whole, &bytes})
    if (r->out.size() > in.size() || in.substr(0, r->out.size()) != r->out) __builtin_trap();
  if (whole.ok != bytes.ok || (whole.ok && whole.out != bytes.out)) __builtin_trap();
  if (whole.opaque && (shape >> 4) == 0) __builtin_trap();
  return 0;
}
