#include "api/network_settings.h"

#include <boost/json.hpp>
#include <cctype>

#include "api/http_names.h"
#include "gateway/policy/policy.h"
#include "http/json_fields.h"

namespace vessel::api {

namespace json = boost::json;

namespace {

constexpr size_t kMaxRules = 256, kMaxCredentials = 16;

Error bad(const std::string& what) { return Error(Code::kInvalidArgument, what); }

}  // namespace

bool credentialName(std::string_view n) {
  if (n.empty() || n.size() > 63) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.'))
      return false;
  return true;
}

namespace {

// `what` (an array of allow-style rules): at most 256, each checked as the
// gateway will read it. kind: which entries it may hold.
enum class Entries { kNames, kNamesAndAddresses, kAddresses };
Result<std::vector<std::string>> ruleList(const json::value& v, const std::string& what,
                                          Entries kind) {
  if (!v.is_array() || v.as_array().size() > kMaxRules)
    return bad(what + " must be an array of at most 256 names");
  std::vector<std::string> out;
  for (const auto& r : v.as_array()) {
    if (!r.is_string() || r.as_string().size() > 300)
      return bad(what + " holds a non-string or an over-long entry");
    std::string text(r.as_string());
    bool address = gateway::policy::looksLikeAddress(text);
    if (address && kind == Entries::kNames)
      return bad(what + ": '" + text + "': an address; only names are meaningful here");
    if (!address && kind == Entries::kAddresses)
      return bad(what + ": '" + text + "': only IP addresses and CIDR ranges can be denied");
    if (kind == Entries::kAddresses) {
      if (auto c = gateway::policy::parseDenyRange(text); !c.ok())
        return bad(what + ": " + c.error().message());
    } else if (address) {
      if (auto a = gateway::policy::parseAllowAddress(text); !a.ok())
        return bad(what + ": " + a.error().message());
    } else if (auto rule = gateway::policy::parseRule(text); !rule.ok()) {
      return bad(what + ": '" + text + "': " + rule.error().message());
    }
    out.push_back(std::move(text));
  }
  return out;
}

}  // namespace

Result<NetworkSettings> parseNetworkSettings(const json::value& network,
                                             const json::value* credentials) {
  NetworkSettings s;
  if (!network.is_object()) return bad("network must be an object");
  bool has_mode = false;
  for (const auto& [k, v] : network.as_object()) {
    if (k == "mode") {
      if (!v.is_string() ||
          (v.as_string() != "none" && v.as_string() != "allowlist" && v.as_string() != "full"))
        return bad("network.mode must be none, allowlist or full");
      s.mode = std::string(v.as_string());
      has_mode = true;
    } else if (k == "allow" || k == "inspect" || k == "deny") {
      Entries kind = k == "allow"  ? Entries::kNamesAndAddresses
                     : k == "deny" ? Entries::kAddresses
                                   : Entries::kNames;
      auto rules = ruleList(v, "network." + std::string(k), kind);
      if (!rules.ok()) return std::move(rules).error();
      (k == "allow" ? s.allow : k == "deny" ? s.deny : s.inspect) = std::move(*rules);
    } else {
      return bad("network: unknown field '" + std::string(k) + "'");
    }
  }
  // {"allow": [...]} alone means an allowlist, and an empty one allows
  // nothing (never "everything"); no mode and no allow: the node's default.
  if (!has_mode && network.as_object().contains("allow"))
    s.mode = s.allow.empty() ? "none" : "allowlist";
  // In full mode, allow may hold addresses: exceptions to deny.
  for (const auto& a : s.allow)
    if (s.mode != "allowlist" && (s.mode != "full" || !gateway::policy::looksLikeAddress(a)))
      return bad(
          "network.allow is only meaningful with mode allowlist (or, for addresses that are "
          "exceptions to network.deny, mode full)");
  if (s.mode == "none" && !s.deny.empty()) return bad("network.deny is meaningless with mode none");
  if (s.mode == "none" && !s.inspect.empty())
    return bad("network.inspect is meaningless with mode none");
  if (credentials) {
    if (!credentials->is_array() || credentials->as_array().size() > kMaxCredentials)
      return bad("credentials must be an array of at most 16 names");
    for (const auto& c : credentials->as_array()) {
      if (!c.is_string() || !credentialName(c.as_string()))
        return bad("credentials: bad credential name");
      s.credentials.emplace_back(c.as_string());
    }
  }
  return s;
}

Result<NetworkSettings> parseNetworkRequest(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, parseObject(body, 8));
  json::object net;
  for (const auto& [k, v] : o)
    if (k != "credentials") net[k] = v;
  return parseNetworkSettings(net, o.if_contains("credentials"));
}

json::object networkJson(const NetworkSettings& s) {
  json::array allow, creds, inspect, deny;
  for (const auto& a : s.allow) allow.emplace_back(a);
  for (const auto& c : s.credentials) creds.emplace_back(c);
  for (const auto& i : s.inspect) inspect.emplace_back(i);
  for (const auto& d : s.deny) deny.emplace_back(d);
  return json::object{{"mode", s.mode},
                      {"allow", allow},
                      {"credentials", creds},
                      {"inspect", inspect},
                      {"deny", deny}};
}

}  // namespace vessel::api
