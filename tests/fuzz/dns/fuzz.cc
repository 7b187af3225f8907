// DNS query and response parsers.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/dns/message.h"
#include "gateway/name.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vessel::gateway;
  std::string_view in(reinterpret_cast<const char*>(data), size);  // SAFETY: fuzzer bytes
  auto q = dns::parseQuery(in);
  if (q.ok()) {
    auto n = normalizeName(q->name);
    std::string resp = dns::buildResponse(*q, dns::Rcode::kRefused, {});
    if (n.ok()) (void)dns::parseResponse(resp, q->id, *n, q->qtype);
  }
  uint16_t id = size >= 2 ? static_cast<uint16_t>(data[0] << 8 | data[1]) : 0;
  (void)dns::parseResponse(in, id, "a.test", dns::kTypeA);
  return 0;
}
