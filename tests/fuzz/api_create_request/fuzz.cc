// The native API's sandbox bodies (POST /v1/sandboxes, :fork, :extend): any
// bytes parse to a request within the documented bounds or to an Error.
// Network settings that parse must survive the trip through the JSON the
// store keeps (networkJson) unchanged, since every restore reads them back.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/network_settings.h"
#include "api/resources.h"

namespace {

using namespace vessel::api;

void checkNetworkRoundTrip(const NetworkSettings& s) {
  if (s.mode.empty()) return;  // the node's default: stored once it is applied
  boost::json::object o = networkJson(s);
  boost::json::value creds = o.at("credentials");
  o.erase("credentials");
  auto again = parseNetworkSettings(o, &creds);
  if (!again.ok() || again->mode != s.mode || again->allow != s.allow ||
      again->inspect != s.inspect || again->deny != s.deny || again->credentials != s.credentials)
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto r = parseCreateRequest(in); r.ok()) {
    if (r->env.size() > 64 || r->metadata.size() > 32 || r->template_name.empty() ||
        r->template_name.size() > 64 || (r->vcpus && (*r->vcpus < 1 || *r->vcpus > 64)) ||
        (r->memory_mib && (*r->memory_mib < 64 || *r->memory_mib > (1u << 20))) ||
        (r->timeout_s && *r->timeout_s < 0) || (r->lifetime_s && *r->lifetime_s < 1))
      __builtin_trap();
    for (const auto& e : r->env)
      if (e.find('=') == std::string::npos || e.front() == '=') __builtin_trap();
    if (r->network) checkNetworkRoundTrip(*r->network);
    if (r->volumes.size() > kMaxSandboxVolumes) __builtin_trap();
    for (const auto& v : r->volumes)
      if (!validVolumeName(v.name) || !validMountPath(v.path)) __builtin_trap();
  }
  if (auto f = parseForkRequest(in); f.ok() && (f->count < 1 || f->count > 16)) __builtin_trap();
  if (auto x = parseExtendRequest(in); x.ok() && !x->timeout_s && !x->lifetime_s) __builtin_trap();
  return 0;
}
