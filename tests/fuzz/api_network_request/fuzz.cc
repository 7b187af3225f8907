// PUT /v1/sandboxes/{id}/network: any body parses to settings the gateway
// can read, or to an Error. What parses must survive the store's JSON
// (networkJson) unchanged, and its rules must parse again as the gateway
// parses them (names, IP and CIDR rules, deny ranges).
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
  namespace pol = vessel::gateway::policy;
  if (s->allow.size() > 256 || s->inspect.size() > 256 || s->deny.size() > 256 ||
      s->credentials.size() > 16)
    __builtin_trap();
  // Names only in an allowlist; in full mode only addresses (exceptions to deny).
  for (const auto& r : s->allow) {
    bool address = pol::looksLikeAddress(r);
    if (s->mode != "allowlist" && !(s->mode == "full" && address)) __builtin_trap();
    if (address ? !pol::parseAddressRule(r).ok() : !pol::parseRule(r).ok()) __builtin_trap();
  }
  for (const auto& r : s->inspect)
    if (pol::looksLikeAddress(r) || !pol::parseRule(r).ok()) __builtin_trap();
  for (const auto& d : s->deny)
    if (!pol::looksLikeAddress(d) || !pol::parseDenyRange(d).ok()) __builtin_trap();
  if (s->mode == "none" && !s->deny.empty()) __builtin_trap();
  for (const auto& c : s->credentials)
    if (!credentialName(c)) __builtin_trap();
  if (s->mode.empty()) return 0;
  boost::json::object o = networkJson(*s);
  boost::json::value creds = o.at("credentials");
  o.erase("credentials");
  auto again = parseNetworkSettings(o, &creds);
  if (!again.ok() || again->mode != s->mode || again->allow != s->allow ||
      again->inspect != s->inspect || again->deny != s->deny ||
      again->credentials != s->credentials)
    __builtin_trap();
  return 0;
}
