#include "api/network_api.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>

#include "api/api_log.h"
#include "api/resources.h"
#include "base/log.h"
#include "gateway/credentials/scrubber.h"
#include "gateway/name.h"
#include "gateway/policy/policy.h"

namespace vessel::api {

namespace json = boost::json;

namespace {

constexpr size_t kMaxHosts = 16, kMaxValue = 8192;

Error bad(const std::string& what) { return Error(Code::kInvalidArgument, what); }

Result<json::value> parseBody(std::string_view body) {
  json::parse_options po;
  po.max_depth = 8;
  boost::system::error_code ec;
  json::value v = json::parse(body, ec, {}, po);
  if (ec) return bad("body is not valid JSON: " + ec.message());
  if (!v.is_object()) return bad("body must be a JSON object");
  return v;
}

json::object credentialJson(const store::CredentialRecord& c) {
  boost::system::error_code ec;
  json::value hosts = json::parse(c.hosts_json, ec);
  return json::object{{"name", c.name},
                      {"hosts", ec ? json::value(json::array()) : hosts},
                      {"header", c.header},
                      {"created_at", rfc3339(c.created_ms)}};
}

}  // namespace

NetworkSettings NetworkApi::defaults() const {
  NetworkSettings s;
  s.mode = egress_ ? default_mode_ : "none";
  return s;
}

std::optional<Response> NetworkApi::handle(const Request& req, const std::string& tenant,
                                           const std::vector<std::string>& seg) {
  auto method = req.method();
  std::string path(req.target());
  if (auto q = path.find('?'); q != std::string::npos) path.resize(q);
  auto notAllowed = [&](std::string_view allow) { return methodNotAllowed(req, path, allow); };
  if (seg.size() == 2 && seg[1] == "credentials") {
    if (method == http::verb::post) return createCredential(req, tenant);
    if (method == http::verb::get) return listCredentials(req, tenant);
    return notAllowed("GET, POST");
  }
  if (seg.size() == 3 && seg[1] == "credentials") {
    if (!credentialName(seg[2])) return errorResponse(req, bad("bad credential name"));
    if (method == http::verb::delete_) return deleteCredential(req, tenant, seg[2]);
    return notAllowed("DELETE");
  }
  if (seg.size() == 4 && seg[1] == "sandboxes" && seg[3] == "network") {
    if (!validId(seg[2])) return errorResponse(req, bad("bad sandbox id"));
    if (method == http::verb::put) return putNetwork(req, tenant, seg[2]);
    if (method == http::verb::get) return getNetwork(req, tenant, seg[2]);
    return notAllowed("GET, PUT");
  }
  return std::nullopt;
}

Result<json::object> NetworkApi::policyFor(const std::string& tenant, const NetworkSettings& s,
                                           bool strict) {
  json::object p{{"mode", s.mode}};
  json::array allow, creds;
  for (const auto& a : s.allow) allow.emplace_back(a);
  for (const auto& name : s.credentials) {
    VESSEL_ASSIGN_OR_RETURN(auto c, store_.getCredential(tenant, name));
    if (!c) {
      if (strict) return Error(Code::kNotFound, "credential '" + name + "' does not exist");
      log().warn("credential '{}' no longer exists; left out of the policy", name);
      continue;
    }
    boost::system::error_code ec;
    json::value hosts = json::parse(c->hosts_json, ec);
    if (ec) return Error(Code::kInternal, "credential '" + name + "': stored hosts are corrupt");
    creds.push_back(json::object{
        {"name", c->name}, {"hosts", hosts}, {"header", c->header}, {"value", c->value}});
  }
  p["allow"] = std::move(allow);
  p["credentials"] = std::move(creds);
  json::array inspect;
  for (const auto& i : s.inspect) inspect.emplace_back(i);
  p["inspect"] = std::move(inspect);
  // What the gateway will accept, checked before anything depends on it.
  json::object check = p;
  check["generation"] = 1;  // Egress gives the real one
  if (auto v = gateway::policy::Policy::fromJson(check); !v.ok())
    return Error(Code::kInvalidArgument, "network policy: " + v.error().message());
  return p;
}

Result<node::GuestNetwork> NetworkApi::prepare(const std::string& tenant,
                                               const std::string& sandbox_id,
                                               const NetworkSettings& given) {
  NetworkSettings s = given;
  if (s.mode.empty()) s.mode = defaults().mode;  // credentials alone: the node's default
  if (!egress_ && s.mode != "none")
    return Error(Code::kFailedPrecondition,
                 "this node runs without egress (vesseld --no-egress): only network mode none");
  if (!allow_public_suffix_wildcards_) VESSEL_TRY(checkWildcards(s));
  VESSEL_TRY(policyFor(tenant, s));
  VESSEL_TRY(store_.setSandboxNetwork(sandbox_id, json::serialize(networkJson(s))));
  node::GuestNetwork g;
  g.route = s.mode != "none";
  if (g.route) g.ca_pem = egress_->caPem();
  return g;
}

Status NetworkApi::inherit(const std::string& parent, const std::string& child) {
  VESSEL_ASSIGN_OR_RETURN(std::string text, store_.getSandboxNetwork(parent));
  if (text.empty()) return okStatus();
  return store_.setSandboxNetwork(child, text);
}

Result<NetworkSettings> NetworkApi::stored(const std::string& sandbox_id) {
  VESSEL_ASSIGN_OR_RETURN(std::string text, store_.getSandboxNetwork(sandbox_id));
  NetworkSettings none;
  none.mode = "none";
  if (text.empty()) return none;  // a sandbox from before egress: no network
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return Error(Code::kInternal, "stored network settings are corrupt");
  json::object net{{"mode", v.at("mode")}, {"allow", v.at("allow")}};
  if (const auto* i = v.as_object().if_contains("inspect")) net["inspect"] = *i;
  return parseNetworkSettings(net, v.as_object().if_contains("credentials"));
}

Status NetworkApi::attach(const std::string& tenant, const node::Sandbox& sb) {
  if (!egress_) return okStatus();
  VESSEL_ASSIGN_OR_RETURN(auto s, stored(sb.id()));
  if (!sb.slot()) {
    // A VM from a run without egress (mode none) needs nothing.
    if (s.mode == "none") return okStatus();
    return Error(Code::kFailedPrecondition,
                 "sandbox " + sb.id() + " has no network slot; its template has no NIC");
  }
  VESSEL_ASSIGN_OR_RETURN(auto policy, policyFor(tenant, s, false));
  VESSEL_TRY(egress_->setSandbox(sb.id(), sb.slot()->sourceAddress(), std::move(policy)));
  attached_[sb.id()] = {tenant, sb.slot()->sourceAddress()};
  return okStatus();
}

void NetworkApi::refreshUsers(const std::string& tenant, const std::string& credential) {
  if (!egress_) return;
  for (const auto& [id, a] : attached_) {
    if (a.tenant != tenant) continue;
    auto s = stored(id);
    if (!s.ok()) continue;
    if (std::find(s->credentials.begin(), s->credentials.end(), credential) == s->credentials.end())
      continue;
    auto policy = policyFor(tenant, *s, false);
    Status st = policy.ok() ? egress_->setSandbox(id, a.source, std::move(*policy))
                            : Status(policy.error());
    if (!st.ok())
      log().forSandbox(id).error("credential '{}' change not applied: {}", credential,
                                 st.error().message());
  }
}

void NetworkApi::detach(const std::string& sandbox_id) {
  if (!egress_ || !attached_.erase(sandbox_id)) return;
  if (auto s = egress_->removeSandbox(sandbox_id); !s.ok())
    log().forSandbox(sandbox_id).warn("{}", s.error().message());
}

Response NetworkApi::putNetwork(const Request& req, const std::string& tenant,
                                const std::string& id) {
  auto sb = store_.getSandbox(tenant, id);
  if (!sb.ok()) return errorResponse(req, sb.error());
  if (!sb->has_value() || (*sb)->state == store::SandboxState::kDeleted)
    return errorResponse(req, Error(Code::kNotFound, "sandbox " + id + " does not exist"));
  auto body = parseBody(req.body());
  if (!body.ok()) return errorResponse(req, body.error());
  auto& o = body->as_object();
  // The body is the `network` object, optionally with `credentials`.
  json::object net;
  for (const auto& [k, v] : o)
    if (k != "credentials") net[k] = v;
  auto s = parseNetworkSettings(net, o.if_contains("credentials"));
  if (!s.ok()) return errorResponse(req, s.error());
  auto now = update(tenant, id, std::move(*s), (*sb)->state == store::SandboxState::kPaused);
  if (!now.ok()) return errorResponse(req, now.error());
  return jsonResponse(req, http::status::ok, json::serialize(networkJson(*now)));
}

Result<NetworkSettings> NetworkApi::update(const std::string& tenant, const std::string& id,
                                           NetworkSettings s, bool paused) {
  if (s.mode.empty()) s.mode = defaults().mode;
  if (!egress_ && s.mode != "none")
    return Error(Code::kFailedPrecondition,
                 "this node runs without egress: only network mode none");
  if (!allow_public_suffix_wildcards_) VESSEL_TRY(checkWildcards(s));
  VESSEL_ASSIGN_OR_RETURN(auto policy, policyFor(tenant, s));
  auto old = stored(id);
  if (old.ok() && (old->mode == "none") != (s.mode == "none") && !paused)
    // The guest's route is set up once per restore; switching between none
    // and the others needs its interface reconfigured. Pause/resume does it.
    log().forSandbox(id).info("network mode {} -> {}: the guest's route changes on next resume",
                              old->mode, s.mode);
  VESSEL_TRY(store_.setSandboxNetwork(id, json::serialize(networkJson(s))));
  if (auto it = attached_.find(id); it != attached_.end()) {
    // Live: the gateway resets open connections the new policy refuses
    // before it answers.
    if (auto st = egress_->setSandbox(id, it->second.source, std::move(policy)); !st.ok()) {
      log().forSandbox(id).error("live network change: {}", st.error().message());
      return Error(Code::kUnavailable, st.error().message());
    }
  }
  return s;
}

Response NetworkApi::getNetwork(const Request& req, const std::string& tenant,
                                const std::string& id) {
  auto sb = store_.getSandbox(tenant, id);
  if (!sb.ok()) return errorResponse(req, sb.error());
  if (!sb->has_value() || (*sb)->state == store::SandboxState::kDeleted)
    return errorResponse(req, Error(Code::kNotFound, "sandbox " + id + " does not exist"));
  auto s = stored(id);
  if (!s.ok()) return errorResponse(req, s.error());
  return jsonResponse(req, http::status::ok, json::serialize(networkJson(*s)));
}

Response NetworkApi::createCredential(const Request& req, const std::string& tenant) {
  auto body = parseBody(req.body());
  if (!body.ok()) return errorResponse(req, body.error());
  store::CredentialRecord c;
  c.tenant_id = tenant;
  json::array hosts;
  for (const auto& [k, v] : body->as_object()) {
    if (k == "name") {
      if (!v.is_string() || !credentialName(v.as_string()))
        return errorResponse(req, bad("name: 1-63 of [A-Za-z0-9._-]"));
      c.name = std::string(v.as_string());
    } else if (k == "hosts") {
      if (!v.is_array() || v.as_array().empty() || v.as_array().size() > kMaxHosts)
        return errorResponse(req, bad("hosts must be an array of 1 to 16 host names"));
      for (const auto& h : v.as_array()) {
        if (!h.is_string()) return errorResponse(req, bad("hosts holds a non-string"));
        auto n = gateway::normalizeName(h.as_string());
        if (!n.ok())
          return errorResponse(
              req, bad("hosts: '" + std::string(h.as_string()) + "': " + n.error().message()));
        hosts.emplace_back(*n);
      }
    } else if (k == "header") {
      if (!v.is_string() || !injectableHeader(v.as_string()))
        return errorResponse(req, bad("header must be an HTTP field name the gateway may set"));
      c.header = std::string(v.as_string());
    } else if (k == "value") {
      if (!v.is_string() || v.as_string().empty() || v.as_string().size() > kMaxValue)
        return errorResponse(req, bad("value must be a non-empty string of at most 8192 bytes"));
      for (char ch : v.as_string())
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
          return errorResponse(req, bad("value must not hold control characters"));
      // The gateway masks the secret in responses; a short one would be
      // indistinguishable from ordinary text (and its encodings even more so).
      std::string_view val = v.as_string(), token = val.substr(val.rfind(' ') + 1);
      if (val.size() < gateway::credentials::kMinSecretBytes ||
          token.size() < gateway::credentials::kMinSecretBytes)
        return errorResponse(req, bad("value must be at least 16 bytes, and so must its token "
                                      "after a scheme such as 'Bearer '"));
      c.value = std::string(val);
    } else {
      return errorResponse(req, bad("unknown field '" + std::string(k) + "'"));
    }
  }
  if (c.name.empty() || hosts.empty() || c.header.empty() || c.value.empty())
    return errorResponse(req, bad("name, hosts, header and value are required"));
  c.hosts_json = json::serialize(hosts);
  c.created_ms = store::nowMs();
  if (auto s = store_.putCredential(c); !s.ok()) return errorResponse(req, s.error());
  // Running sandboxes using it get the new value now; the gateway resets
  // their connections that carry the old one. The value is never sent back.
  refreshUsers(tenant, c.name);
  return jsonResponse(req, http::status::created, json::serialize(credentialJson(c)));
}

Response NetworkApi::listCredentials(const Request& req, const std::string& tenant) {
  auto list = store_.listCredentials(tenant);
  if (!list.ok()) return errorResponse(req, list.error());
  json::array items;
  for (const auto& c : *list) items.push_back(credentialJson(c));
  return jsonResponse(req, http::status::ok,
                      json::serialize(json::object{{"credentials", std::move(items)}}));
}

Response NetworkApi::deleteCredential(const Request& req, const std::string& tenant,
                                      const std::string& name) {
  auto c = store_.getCredential(tenant, name);
  if (!c.ok()) return errorResponse(req, c.error());
  if (!c->has_value())
    return errorResponse(req, Error(Code::kNotFound, "credential '" + name + "' does not exist"));
  if (auto s = store_.deleteCredential(tenant, name); !s.ok()) return errorResponse(req, s.error());
  // Revocation reaches live sandboxes: their policy loses the credential and
  // the gateway resets connections that carried it before this returns.
  refreshUsers(tenant, name);
  Response r = jsonResponse(req, http::status::no_content, "");
  return r;
}

}  // namespace vessel::api
