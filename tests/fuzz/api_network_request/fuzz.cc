// PUT /v1/sandboxes/{id}/network: any body parses to settings the gateway
// can read, or to an Error. What parses must survive the store's JSON
// (networkJson) unchanged, and its rules must parse again as the gateway
// parses them.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/network_settings.h"
#include "gateway/policy/policy.h"

using namespace vessel::api;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto s = parseNetworkRequest(in);
  if (!s.ok()) return 0;
  if (s->allow.size() > 256 || s->inspect.size() > 256 || s->credentials.size() > 16)
    __builtin_trap();
  if (s->mode != "allowlist" && !s->allow.empty()) __builtin_trap();
  for (const auto* list : {&s->allow, &s->inspect})
    for (const auto& r : *list)
      if (!vessel::gateway::policy::parseRule(r).ok()) __builtin_trap();
  for (const auto& c : s->credentials)
    if (!credentialName(c)) __builtin_trap();
  if (s->mode.empty()) return 0;
  boost::json::object o = networkJson(*s);
  boost::json::value creds = o.at("credentials");
  o.erase("credentials");
  auto again = parseNetworkSettings(o, &creds);
  if (!again.ok() || again->mode != s->mode || again->allow != s->allow ||
      again->inspect != s->inspect || again->credentials != s->credentials)
    __builtin_trap();
  return 0;
}
