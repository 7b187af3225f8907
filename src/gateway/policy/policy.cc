#include "gateway/policy/policy.h"

#include <boost/json.hpp>

#include "gateway/credentials/scrubber.h"
#include "gateway/name.h"

namespace vessel::gateway::policy {

namespace json = boost::json;

std::string_view modeName(Mode m) {
  switch (m) {
    case Mode::kNone: return "none";
    case Mode::kAllowlist: return "allowlist";
    case Mode::kFull: return "full";
  }
  return "?";
}

bool Rule::matchesName(std::string_view n) const {
  if (!wildcard) return n == name;
  // Whole labels: "x.a.test" ends with ".a.test"; "xa.test" does not.
  return n.size() > name.size() + 1 && n.substr(n.size() - name.size()) == name &&
         n[n.size() - name.size() - 1] == '.';
}

bool Rule::matchesPort(uint16_t port) const {
  if (ports.empty()) return port == 80 || port == 443;
  for (uint16_t p : ports) {
    if (p == port) return true;
  }
  return false;
}

Result<Rule> parseRule(std::string_view text) {
  Rule r;
  size_t colon = text.find(':');
  std::string_view pattern = text.substr(0, colon);
  if (colon != std::string_view::npos) {
    std::string_view port = text.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != port.npos) {
      return Error(Code::kInvalidArgument, "rule " + std::string(text) + ": bad port");
    }
    int p = std::stoi(std::string(port));
    if (p < 1 || p > 65535) {
      return Error(Code::kInvalidArgument, "rule " + std::string(text) + ": bad port");
    }
    r.ports.push_back(static_cast<uint16_t>(p));
  }
  if (pattern.substr(0, 2) == "*.") {
    r.wildcard = true;
    pattern.remove_prefix(2);
  }
  auto n = normalizeName(pattern);
  if (!n.ok()) return std::move(n).error().withContext("rule");
  // "*.test" would open a whole top-level domain; require two labels.
  if (r.wildcard && n->find('.') == std::string::npos) {
    return Error(Code::kInvalidArgument, "rule " + std::string(text) + ": wildcard too broad");
  }
  r.name = std::move(*n);
  return r;
}

bool Policy::allowsName(std::string_view name) const {
  if (mode == Mode::kFull) return true;
  if (mode == Mode::kNone) return false;
  for (const Rule& r : rules) {
    if (r.matchesName(name)) return true;
  }
  return false;
}

bool Policy::allows(std::string_view name, uint16_t port) const {
  if (mode == Mode::kFull) return true;
  if (mode == Mode::kNone) return false;
  for (const Rule& r : rules) {
    if (r.matchesName(name) && r.matchesPort(port)) return true;
  }
  return false;
}

const Credential* Policy::credentialFor(std::string_view name) const {
  for (const Credential& c : credentials) {
    for (const std::string& h : c.hosts) {
      if (h == name) return &c;
    }
  }
  return nullptr;
}

bool Policy::inspects(std::string_view name, uint16_t port) const {
  for (const Rule& r : inspect) {
    if (r.matchesName(name) && r.matchesPort(port)) return true;
  }
  return false;
}

bool Policy::allowsAddress(const boost::asio::ip::address& a, uint16_t port) const {
  if (mode == Mode::kNone) return false;
  if (mode == Mode::kFull) return !deniesAddress(a, port);
  for (const AddressRule& r : addresses) {
    if (r.matches(a, port)) return true;
  }
  return false;
}

bool Policy::deniesAddress(const boost::asio::ip::address& a, std::optional<uint16_t> port) const {
  bool denied = false;
  for (const Cidr& c : deny) denied = denied || c.contains(a);
  if (!denied) return false;
  // E2B: allowed entries take precedence over denied ones.
  for (const AddressRule& r : addresses) {
    if (r.cidr.contains(a) && (!port || r.matchesPort(*port))) return false;
  }
  return true;
}

namespace {

Result<std::string> str(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  if (!v || !v->is_string()) {
    return Error(Code::kInvalidArgument, "policy: \"" + std::string(key) + "\" must be a string");
  }
  return std::string(v->as_string());
}

Result<std::vector<std::string>> strList(const json::object& o, std::string_view key) {
  std::vector<std::string> out;
  auto* v = o.if_contains(key);
  if (!v) return out;
  if (!v->is_array()) return Error(Code::kInvalidArgument, "policy: " + std::string(key));
  for (const auto& e : v->as_array()) {
    if (!e.is_string()) return Error(Code::kInvalidArgument, "policy: " + std::string(key));
    out.emplace_back(e.as_string());
  }
  if (out.size() > 1000) return Error(Code::kInvalidArgument, "policy: too many entries");
  return out;
}

}  // namespace

Result<Policy> Policy::fromJson(const json::value& v) {
  if (!v.is_object()) return Error(Code::kInvalidArgument, "policy: not an object");
  const json::object& o = v.as_object();
  Policy p;
  auto* gen = o.if_contains("generation");
  if (!gen || !gen->is_number()) return Error(Code::kInvalidArgument, "policy: no generation");
  boost::system::error_code ec;
  p.generation = gen->to_number<uint64_t>(ec);
  if (ec) return Error(Code::kInvalidArgument, "policy: bad generation");
  VESSEL_ASSIGN_OR_RETURN(std::string mode, str(o, "mode"));
  if (mode == "none")
    p.mode = Mode::kNone;
  else if (mode == "allowlist")
    p.mode = Mode::kAllowlist;
  else if (mode == "full")
    p.mode = Mode::kFull;
  else
    return Error(Code::kInvalidArgument, "policy: unknown mode " + mode);
  VESSEL_ASSIGN_OR_RETURN(auto allow, strList(o, "allow"));
  for (const std::string& a : allow) {
    if (looksLikeAddress(a)) {
      VESSEL_ASSIGN_OR_RETURN(AddressRule r, parseAddressRule(a));
      p.addresses.push_back(std::move(r));
      continue;
    }
    VESSEL_ASSIGN_OR_RETURN(Rule r, parseRule(a));
    p.rules.push_back(std::move(r));
  }
  VESSEL_ASSIGN_OR_RETURN(auto deny, strList(o, "deny"));
  for (const std::string& d : deny) {
    VESSEL_ASSIGN_OR_RETURN(Cidr c, parseDenyRange(d));
    p.deny.push_back(std::move(c));
  }
  if (auto* creds = o.if_contains("credentials")) {
    if (!creds->is_array()) return Error(Code::kInvalidArgument, "policy: credentials");
    for (const auto& c : creds->as_array()) {
      if (!c.is_object()) return Error(Code::kInvalidArgument, "policy: credential");
      Credential cred;
      VESSEL_ASSIGN_OR_RETURN(cred.name, str(c.as_object(), "name"));
      VESSEL_ASSIGN_OR_RETURN(std::string header, str(c.as_object(), "header"));
      VESSEL_ASSIGN_OR_RETURN(cred.value, str(c.as_object(), "value"));
      VESSEL_ASSIGN_OR_RETURN(auto hosts, strList(c.as_object(), "hosts"));
      for (char& ch : header) {
        if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
      }
      if (header.empty() || header.find_first_of(": \r\n") != std::string::npos ||
          cred.value.find_first_of("\r\n") != std::string::npos || cred.value.empty()) {
        return Error(Code::kInvalidArgument, "policy: credential " + cred.name + " header");
      }
      if (std::string_view v = cred.value;
          v.size() < credentials::kMinSecretBytes ||
          v.size() - v.rfind(' ') - 1 < credentials::kMinSecretBytes) {
        return Error(Code::kInvalidArgument,
                     "policy: credential " + cred.name + " value shorter than 16 bytes");
      }
      cred.header = std::move(header);
      for (const std::string& h : hosts) {
        VESSEL_ASSIGN_OR_RETURN(std::string n, normalizeName(h));
        cred.hosts.push_back(std::move(n));
      }
      if (cred.hosts.empty()) {
        return Error(Code::kInvalidArgument, "policy: credential " + cred.name + " has no hosts");
      }
      p.credentials.push_back(std::move(cred));
    }
  }
  VESSEL_ASSIGN_OR_RETURN(auto inspect, strList(o, "inspect"));
  for (const std::string& h : inspect) {
    VESSEL_ASSIGN_OR_RETURN(Rule r, parseRule(h));
    p.inspect.push_back(std::move(r));
  }
  return p;
}

}  // namespace vessel::gateway::policy
