#include "store/settings.h"

#include <boost/json.hpp>

namespace vessel::store {

namespace json = boost::json;

namespace {

constexpr size_t kMaxMode = 16;
// Above what the public and E2B APIs accept (256 rules of up to 300 bytes).
constexpr size_t kMaxList = 512;
constexpr size_t kMaxName = 512;

Error bad(const std::string& what) { return Error(Code::kInvalidArgument, what); }

json::array toArray(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

Result<std::vector<std::string>> names(const json::object& o, std::string_view key) {
  std::vector<std::string> out;
  const auto* v = o.if_contains(key);
  if (!v || v->is_null()) return out;
  if (!v->is_array()) return bad("network." + std::string(key) + " must be an array");
  if (v->as_array().size() > kMaxList)
    return bad("network." + std::string(key) + " has too many items");
  for (const auto& e : v->as_array()) {
    if (!e.is_string() || e.as_string().size() > kMaxName)
      return bad("network." + std::string(key) + " must hold strings of at most " +
                 std::to_string(kMaxName) + " bytes");
    out.emplace_back(e.as_string());
  }
  return out;
}

}  // namespace

json::object encodeNetwork(const NetworkSettings& n) {
  return json::object{{"mode", n.mode},
                      {"allow", toArray(n.allow)},
                      {"credentials", toArray(n.credentials)},
                      {"inspect", toArray(n.inspect)},
                      {"deny", toArray(n.deny)}};
}

Result<NetworkSettings> decodeNetwork(const json::value& v) {
  if (!v.is_object()) return bad("network must be an object");
  const auto& o = v.as_object();
  NetworkSettings s;
  if (const auto* mode = o.if_contains("mode"); mode && !mode->is_null()) {
    if (!mode->is_string() || mode->as_string().size() > kMaxMode)
      return bad("network.mode must be a short string");
    s.mode = std::string(mode->as_string());
  }
  if (!s.mode.empty() && s.mode != "none" && s.mode != "allowlist" && s.mode != "full")
    return bad("network.mode must be none, allowlist or full");
  VESSEL_ASSIGN_OR_RETURN(s.allow, names(o, "allow"));
  VESSEL_ASSIGN_OR_RETURN(s.credentials, names(o, "credentials"));
  VESSEL_ASSIGN_OR_RETURN(s.inspect, names(o, "inspect"));
  VESSEL_ASSIGN_OR_RETURN(s.deny, names(o, "deny"));
  return s;
}

// {"public": bool, "maskHost": string} (rows written by migration 11's
// first users read the same).
json::object encodeIngress(const IngressSettings& i) {
  json::object o{{"public", i.public_traffic}};
  if (!i.mask_host.empty()) o["maskHost"] = i.mask_host;
  return o;
}

Result<IngressSettings> decodeIngress(const json::value& v) {
  if (!v.is_object()) return bad("ingress settings must be an object");
  const auto& o = v.as_object();
  IngressSettings i;
  const auto* p = o.if_contains("public");
  if (!p || !p->is_bool()) return bad("ingress settings need public: true or false");
  i.public_traffic = p->as_bool();
  if (const auto* m = o.if_contains("maskHost"); m && !m->is_null()) {
    if (!m->is_string() || m->as_string().size() > kMaxName)
      return bad("ingress maskHost must be a string of at most " + std::to_string(kMaxName) +
                 " bytes");
    i.mask_host = std::string(m->as_string());
  }
  return i;
}

}  // namespace vessel::store
