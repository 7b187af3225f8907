// ClientHello parser: whole input, then the same bytes split at a point the
// input chooses, must agree (incremental parsing is the point of the parser).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/name.h"
#include "gateway/tls/client_hello.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using vessel::gateway::tls::ClientHelloParser;
  std::string_view in(reinterpret_cast<const char*>(data), size);  // SAFETY: fuzzer bytes
  ClientHelloParser whole;
  whole.feed(in);
  size_t split = size ? data[0] % (size + 1) : 0;
  ClientHelloParser parts;
  parts.feed(in.substr(0, split));
  parts.feed(in.substr(split));
  if (whole.state() == ClientHelloParser::State::kDone) {
    for (const auto& n : whole.hello().server_names) (void)vessel::gateway::normalizeName(n);
  }
  if (whole.state() != parts.state()) __builtin_trap();
  return 0;
}
