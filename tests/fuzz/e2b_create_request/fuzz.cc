// E2B's POST /sandboxes (v1 and v2) and PUT /sandboxes/{id}/network bodies:
// any body parses to a bounded request or an Error, and the egress it
// carries is a policy the gateway reads as such (names, IP and CIDR rules,
// deny ranges), never one it would refuse after the API said yes.
#include <boost/json.hpp>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "e2b/requests.h"
#include "gateway/policy/policy.h"

namespace {

void checkEgress(const vessel::e2b::Egress& e) {
  const auto& s = e.spec;
  if (s.mode != "allowlist" && s.mode != "full") __builtin_trap();
  if (s.allow.size() > 256 || s.deny.size() > 256) __builtin_trap();
  boost::json::array allow, deny;
  for (const auto& a : s.allow) allow.emplace_back(a);
  for (const auto& d : s.deny) deny.emplace_back(d);
  auto p = vessel::gateway::policy::Policy::fromJson(
      boost::json::object{{"generation", 1}, {"mode", s.mode}, {"allow", allow}, {"deny", deny}});
  if (!p.ok()) __builtin_trap();
  // In full mode every name is allowed: only addresses (deny exceptions) stay.
  if (s.mode == "full" && !p->rules.empty()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);  // SAFETY: read-only bytes
  for (bool v2 : {false, true}) {
    auto r = vessel::e2b::parseNewSandbox(body, v2);
    if (!r.ok()) continue;
    if (r->metadata.size() > 64 || r->env.size() > 64 || r->template_id.empty()) __builtin_trap();
    if (r->egress) checkEgress(*r->egress);
  }
  if (auto u = vessel::e2b::parseNetworkUpdate(body); u.ok()) checkEgress(*u);
  return 0;
}
