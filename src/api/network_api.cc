#include "api/network_api.h"

#include <boost/json.hpp>

#include "api/network_settings.h"
#include "api/resources.h"
#include "gateway/credentials/scrubber.h"
#include "gateway/name.h"

namespace vessel::api {

namespace asio = boost::asio;
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
  json::array hosts;
  for (const auto& h : c.hosts) hosts.emplace_back(h);
  return json::object{{"name", c.name},
                      {"hosts", std::move(hosts)},
                      {"header", c.header},
                      {"created_at", rfc3339(c.created_ms)}};
}

// The body of POST /v1/credentials, checked.
Result<ops::CredentialSpec> parseCredential(const json::object& body) {
  ops::CredentialSpec c;
  for (const auto& [k, v] : body) {
    if (k == "name") {
      if (!v.is_string() || !credentialName(v.as_string()))
        return bad("name: 1-63 of [A-Za-z0-9._-]");
      c.name = std::string(v.as_string());
    } else if (k == "hosts") {
      if (!v.is_array() || v.as_array().empty() || v.as_array().size() > kMaxHosts)
        return bad("hosts must be an array of 1 to 16 host names");
      for (const auto& h : v.as_array()) {
        if (!h.is_string()) return bad("hosts holds a non-string");
        auto n = gateway::normalizeName(h.as_string());
        if (!n.ok())
          return bad("hosts: '" + std::string(h.as_string()) + "': " + n.error().message());
        c.hosts.push_back(std::move(*n));
      }
    } else if (k == "header") {
      if (!v.is_string() || !injectableHeader(v.as_string()))
        return bad("header must be an HTTP field name the gateway may set");
      c.header = std::string(v.as_string());
    } else if (k == "value") {
      if (!v.is_string() || v.as_string().empty() || v.as_string().size() > kMaxValue)
        return bad("value must be a non-empty string of at most 8192 bytes");
      for (char ch : v.as_string())
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
          return bad("value must not hold control characters");
      // The gateway masks the secret in responses; a short one would be
      // indistinguishable from ordinary text (and its encodings even more so).
      std::string_view val = v.as_string(), token = val.substr(val.rfind(' ') + 1);
      if (val.size() < gateway::credentials::kMinSecretBytes ||
          token.size() < gateway::credentials::kMinSecretBytes)
        return bad(
            "value must be at least 16 bytes, and so must its token "
            "after a scheme such as 'Bearer '");
      c.value = std::string(val);
    } else {
      return bad("unknown field '" + std::string(k) + "'");
    }
  }
  if (c.name.empty() || c.hosts.empty() || c.header.empty() || c.value.empty())
    return bad("name, hosts, header and value are required");
  return c;
}

}  // namespace

void NetworkApi::install(Router& r, const Authenticated& authed) {
  r.paramType("credential", [](std::string_view n) -> Status {
    if (!credentialName(n)) return bad("bad credential name");
    return okStatus();
  });
  using P = const Params&;
  r.post("/v1/credentials", authed([this](const Request& q, P, std::string t) {
           return createCredential(q, std::move(t));
         }));
  r.get("/v1/credentials",
        authed([this](const Request& q, P, std::string t) -> asio::awaitable<Response> {
          co_return listCredentials(q, t);
        }));
  r.del("/v1/credentials/{name:credential}", authed([this](const Request& q, P p, std::string t) {
          return deleteCredential(q, std::move(t), p["name"]);
        }));
  // The sandbox type is the control plane's (bad ids are 400).
  r.put("/v1/sandboxes/{id:sandbox}/network", authed([this](const Request& q, P p, std::string t) {
          return putNetwork(q, std::move(t), p["id"]);
        }));
  r.get("/v1/sandboxes/{id:sandbox}/network",
        authed([this](const Request& q, P p, std::string t) -> asio::awaitable<Response> {
          co_return getNetwork(q, t, p["id"]);
        }));
}

asio::awaitable<Response> NetworkApi::putNetwork(const Request& req, std::string tenant,
                                                 std::string id) {
  // An unknown sandbox is that, whatever the body says.
  if (auto sb = lifecycle_.get(tenant, id); !sb.ok()) co_return errorResponse(req, sb.error());
  auto s = parseNetworkRequest(req.body());
  if (!s.ok()) co_return errorResponse(req, s.error());
  auto now = co_await lifecycle_.egress().setNetwork(tenant, id, std::move(*s));
  if (!now.ok()) co_return errorResponse(req, now.error());
  co_return jsonResponse(req, http::status::ok, json::serialize(networkJson(*now)));
}

Response NetworkApi::getNetwork(const Request& req, const std::string& tenant,
                                const std::string& id) {
  auto s = lifecycle_.egress().network(tenant, id);
  if (!s.ok()) return errorResponse(req, s.error());
  return jsonResponse(req, http::status::ok, json::serialize(networkJson(*s)));
}

asio::awaitable<Response> NetworkApi::createCredential(const Request& req, std::string tenant) {
  auto body = parseBody(req.body());
  if (!body.ok()) co_return errorResponse(req, body.error());
  auto c = parseCredential(body->as_object());
  if (!c.ok()) co_return errorResponse(req, c.error());
  // Running sandboxes using it get the new value at once (ops). The value
  // is never sent back.
  auto stored = co_await lifecycle_.egress().putCredential(tenant, std::move(*c));
  if (!stored.ok()) co_return errorResponse(req, stored.error());
  co_return jsonResponse(req, http::status::created, json::serialize(credentialJson(*stored)));
}

Response NetworkApi::listCredentials(const Request& req, const std::string& tenant) {
  auto list = lifecycle_.egress().listCredentials(tenant);
  if (!list.ok()) return errorResponse(req, list.error());
  json::array items;
  for (const auto& c : *list) items.push_back(credentialJson(c));
  return jsonResponse(req, http::status::ok,
                      json::serialize(json::object{{"credentials", std::move(items)}}));
}

asio::awaitable<Response> NetworkApi::deleteCredential(const Request& req, std::string tenant,
                                                       std::string name) {
  // Revocation reaches live sandboxes before this answers (ops).
  if (auto s = co_await lifecycle_.egress().deleteCredential(tenant, name); !s.ok())
    co_return errorResponse(req, s.error());
  co_return jsonResponse(req, http::status::no_content, "");
}

}  // namespace vessel::api
