// The E2B REST API's sandbox objects: Sandbox (create, connect) and
// SandboxDetail / ListedSandbox (get, list), from the lifecycle's records.
#include <boost/json.hpp>

#include "e2b/rest.h"
#include "e2b/rest_states.h"
#include "ops/events.h"

namespace vessel::e2b {

namespace json = boost::json;

json::object RestApi::sandboxJson(const store::SandboxRecord& s) const {
  // The record carries its ingress settings (none given: E2B's default, public).
  Ingress in = s.ingress.value_or(Ingress{});
  json::object o{{"sandboxID", s.id},
                 {"templateID", s.template_name},
                 {"alias", s.template_name},
                 {"clientID", "vessel"},
                 {"envdVersion", kEnvdVersion},
                 {"envdAccessToken", tokens_.forSandbox(s.id)},
                 {"trafficAccessToken", nullptr},
                 {"domain", nullptr}};
  if (!in.public_traffic) o["trafficAccessToken"] = tokens_.trafficForSandbox(s.id);
  if (!domain_.empty()) o["domain"] = domain_;
  return o;
}

json::object RestApi::listedJson(const store::SandboxRecord& s, bool detail) const {
  json::object md;
  for (const auto& [k, v] : s.metadata) md[k] = v;
  json::object o{
      {"sandboxID", s.id},
      {"templateID", s.template_name},
      {"alias", s.template_name},
      {"clientID", "vessel"},
      {"startedAt", ops::rfc3339(s.created_ms)},
      {"endAt",
       ops::rfc3339(s.expires_ms > 0 ? s.expires_ms
                                     : s.created_ms + lifecycle_.policy().max_lifetime_s * 1000)},
      {"cpuCount", s.vcpus},
      {"memoryMB", s.memory_mib},
      // The size it was given; a record from before disk sizes has the
      // built-in images' 1 GiB.
      {"diskSizeMB", s.disk_mib > 0 ? static_cast<int64_t>(s.disk_mib) : int64_t{1024}},
      {"metadata", std::move(md)},
      {"state", paused(s.state) ? "paused" : "running"},
      {"envdVersion", kEnvdVersion}};
  if (detail) {
    o["envdAccessToken"] = tokens_.forSandbox(s.id);
    o["domain"] = domain_.empty() ? json::value(nullptr) : json::value(domain_);
    o["lifecycle"] = json::object{{"autoResume", s.auto_resume},
                                  {"onTimeout", s.pause_on_timeout ? "pause" : "kill"}};
    auto net = lifecycle_.egress().givenNetwork(s.id);
    if (net.ok() && *net && !(*net)->mode.empty()) {
      const ops::NetworkSpec& given = **net;
      bool full = given.mode == "full";
      o["allowInternetAccess"] = full;
      json::object n;
      auto strings = [](const std::vector<std::string>& v) {
        json::array a;
        for (const auto& e : v) a.emplace_back(e);
        return a;
      };
      if (!full || !given.deny.empty()) n["allowOut"] = strings(given.allow);
      if (!full) n["denyOut"] = json::array{"0.0.0.0/0"};
      if (full && !given.deny.empty()) n["denyOut"] = strings(given.deny);
      o["network"] = n;
    }
    if (s.ingress && *s.ingress != Ingress{}) {
      const Ingress& in = *s.ingress;
      if (!o.contains("network")) o["network"] = json::object();
      json::object& n = o["network"].as_object();
      n["allowPublicTraffic"] = in.public_traffic;
      if (!in.mask_host.empty()) n["maskRequestHost"] = in.mask_host;
    }
  }
  return o;
}

}  // namespace vessel::e2b
