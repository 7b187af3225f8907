// The E2B REST API's sandbox objects: Sandbox (create, connect) and
// SandboxDetail / ListedSandbox (get, list), from the lifecycle's records.
#include <boost/json.hpp>

#include "e2b/rest.h"
#include "e2b/rest_states.h"
#include "ops/events.h"

namespace vessel::e2b {

namespace json = boost::json;

json::object RestApi::sandboxJson(const store::SandboxRecord& s) const {
  Ingress in = ingressFromJson(lifecycle_.ingress(s.id).value_or(""));
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
  boost::system::error_code ec;
  json::value md = json::parse(s.metadata_json, ec);
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
      {"metadata", ec || !md.is_object() ? json::object() : md.as_object()},
      {"state", paused(s.state) ? "paused" : "running"},
      {"envdVersion", kEnvdVersion}};
  if (detail) {
    o["envdAccessToken"] = tokens_.forSandbox(s.id);
    o["domain"] = domain_.empty() ? json::value(nullptr) : json::value(domain_);
    o["lifecycle"] = json::object{{"autoResume", s.auto_resume},
                                  {"onTimeout", s.pause_on_timeout ? "pause" : "kill"}};
    auto net = lifecycle_.givenNetwork(s.id);
    if (net.ok() && !net->empty()) {
      json::value v = json::parse(*net, ec);
      const json::value* mode = !ec && v.is_object() ? v.as_object().if_contains("mode") : nullptr;
      if (mode && mode->is_string()) {
        bool full = mode->as_string() == "full";
        o["allowInternetAccess"] = full;
        json::object n;
        const json::value* allow = v.as_object().if_contains("allow");
        const json::value* deny = v.as_object().if_contains("deny");
        bool denies = deny && deny->is_array() && !deny->as_array().empty();
        if (!full || denies)
          n["allowOut"] = allow && allow->is_array() ? allow->as_array() : json::array();
        if (!full) n["denyOut"] = json::array{"0.0.0.0/0"};
        if (full && denies) n["denyOut"] = deny->as_array();
        o["network"] = n;
      }
    }
    Ingress in = ingressFromJson(lifecycle_.ingress(s.id).value_or(""));
    if (in != Ingress{}) {
      if (!o.contains("network")) o["network"] = json::object();
      json::object& n = o["network"].as_object();
      n["allowPublicTraffic"] = in.public_traffic;
      if (!in.mask_host.empty()) n["maskRequestHost"] = in.mask_host;
    }
  }
  return o;
}

}  // namespace vessel::e2b
