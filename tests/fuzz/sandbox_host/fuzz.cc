// Fuzzes the sandbox-port Host parser (ingress/host.h) on untrusted Host
// headers and TLS server names: no crash, and what it accepts is a port in
// 1..65535 and an id of [a-z0-9-]{1,64} under the domain.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ingress/host.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)vessel::ingress::hostName(in);
  for (std::string_view domain : {"vessel.localhost:49983", "e2b.test"}) {
    auto h = vessel::ingress::parseSandboxHost(in, domain);
    if (!h) continue;
    if (h->port == 0 || h->sandbox_id.empty() || h->sandbox_id.size() > 64) __builtin_trap();
    for (char c : h->sandbox_id)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) __builtin_trap();
  }
  return 0;
}
