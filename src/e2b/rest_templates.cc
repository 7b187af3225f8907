// The E2B REST API: snapshots (a sandbox forked into a template of the
// tenant's, usable as a create's templateID), templates and their aliases,
// and secrets (the tenant's Vessel credentials).
#include <sys/random.h>

#include <boost/json.hpp>

#include "e2b/rest.h"
#include "http/json_fields.h"
#include "ops/events.h"
#include "templates/naming.h"

namespace vessel::e2b {

namespace json = boost::json;
using store::SandboxState;

namespace {

std::string randomHex(size_t bytes) {
  unsigned char b[16];
  bytes = std::min(bytes, sizeof b);
  if (::getrandom(b, bytes, 0) != static_cast<ssize_t>(bytes)) return "0000";
  static const char* k = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < bytes; ++i) {
    s.push_back(k[b[i] >> 4]);
    s.push_back(k[b[i] & 15]);
  }
  return s;
}

// The newest version of each template name the tenant sees.
std::map<std::string, templates::Manifest> visibleTemplates(templates::TemplateStore& store,
                                                            const std::string& tenant) {
  std::map<std::string, templates::Manifest> out;
  for (auto& m : store.list()) {
    auto name = templates::visibleTemplateName(tenant, m.name);
    if (!name) continue;
    auto it = out.find(*name);
    if (it != out.end() && it->second.created_at >= m.created_at) continue;
    out[*name] = std::move(m);
  }
  return out;
}

json::object secretJson(const store::CredentialRecord& c) {
  std::string at = ops::rfc3339(c.created_ms);
  return json::object{{"secretID", c.name},         {"name", c.name},  {"currentVersion", 1},
                      {"metadata", json::object()}, {"createdAt", at}, {"updatedAt", at}};
}

}  // namespace

Result<std::string> templateName(std::string_view id) {
  // "team/name:tag" -> "name"; the only tag is "default" (one version is served).
  if (auto slash = id.rfind('/'); slash != std::string_view::npos) id = id.substr(slash + 1);
  if (auto colon = id.find(':'); colon != std::string_view::npos) {
    if (id.substr(colon + 1) != "default")
      return Error(Code::kInvalidArgument, "template tags other than 'default' have no mapping");
    id = id.substr(0, colon);
  }
  bool ok = !id.empty() && id.size() <= 64;
  for (char c : id)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_');
  if (!ok) return Error(Code::kInvalidArgument, "bad template id '" + std::string(id) + "'");
  return std::string(id);
}

asio::awaitable<Response> RestApi::createSnapshot(const Request& req, std::string tenant,
                                                  std::string id) {
  auto name = parseSnapshot(req.body());
  if (!name.ok()) co_return errorJson(req, name.error());
  // Unnamed snapshots carry their sandbox's id, so they can be listed by it.
  if (name->empty()) *name = id + "-snap-" + randomHex(4);
  auto r = lifecycle_.operations().forRequest(std::string(req["X-Request-Id"]), [&] {
    return lifecycle_.forkToTemplate(tenant, id, *name);
  });
  if (!r.ok()) co_return errorJson(req, r.error());
  if (auto s = co_await finish(tenant, r->operation); !s.ok()) co_return errorJson(req, s.error());
  co_return jsonBody(
      req, http::status::created,
      json::object{{"snapshotID", *name}, {"names", json::array{json::string(*name)}}});
}

Response RestApi::listSnapshots(const Request& req, const std::string& tenant) {
  auto params = http::parseQuery(req.target(), {"sandboxID", "name", "limit", "nextToken"});
  if (!params.ok()) return errorJson(req, params.error());
  std::string prefix, name;
  if (auto it = params->find("sandboxID"); it != params->end()) prefix = it->second + "-snap-";
  if (auto it = params->find("name"); it != params->end()) {
    auto n = templateName(it->second);
    if (!n.ok()) return errorJson(req, n.error());
    name = *n;
  }
  json::array out;
  for (const auto& [visible, m] : visibleTemplates(templates_, tenant)) {
    if (templates::builtinTemplateName(m.name)) continue;  // the tenant's own only
    if (!prefix.empty() && visible.rfind(prefix, 0) != 0) continue;
    if (!name.empty() && visible != name) continue;
    out.push_back(
        json::object{{"snapshotID", visible}, {"names", json::array{json::string(visible)}}});
  }
  return jsonBody(req, http::status::ok, out);
}

// Every version of the tenant's template; sandboxes made from it run on
// (ops::TemplateCatalogue::remove retires what they hold).
Response RestApi::deleteTemplate(const Request& req, const std::string& tenant,
                                 const std::string& id) {
  auto name = templateName(id);
  if (!name.ok()) return errorJson(req, name.error());
  if (auto s = lifecycle_.deleteTemplate(tenant, *name); !s.ok()) {
    if (s.error().code() == Code::kNotFound)
      return errorJson(req, Error(Code::kNotFound, "template " + *name + " not found"));
    return errorJson(req, s.error());
  }
  return noContent(req);
}

Response RestApi::listTemplates(const Request& req, const std::string& tenant) {
  json::array out;
  for (const auto& [visible, m] : visibleTemplates(templates_, tenant)) {
    bool builtin = templates::builtinTemplateName(m.name);
    out.push_back(json::object{{"templateID", visible},
                               {"buildID", m.version},
                               {"cpuCount", m.vcpus},
                               {"memoryMB", m.memory_mib},
                               {"diskSizeMB", 1024},
                               {"public", builtin},
                               {"aliases", json::array{json::string(visible)}},
                               {"names", json::array{json::string(visible)}},
                               {"createdAt", m.created_at},
                               {"updatedAt", m.created_at},
                               {"createdBy", nullptr},
                               {"lastSpawnedAt", nullptr},
                               {"spawnCount", 0},
                               {"buildCount", 1},
                               {"envdVersion", kEnvdVersion},
                               {"buildStatus", "ready"}});
  }
  return jsonBody(req, http::status::ok, out);
}

Response RestApi::templateAlias(const Request& req, const std::string& tenant,
                                const std::string& alias) {
  auto name = templateName(alias);
  if (!name.ok()) return errorJson(req, name.error());
  auto all = visibleTemplates(templates_, tenant);
  auto it = all.find(*name);
  if (it == all.end())
    return errorJson(req, Error(Code::kNotFound, "template alias " + *name + " not found"));
  return jsonBody(req, http::status::ok,
                  json::object{{"templateID", it->first},
                               {"public", templates::builtinTemplateName(it->second.name)}});
}

// Every secret route goes through the lifecycle's credential calls, so a
// change or a deletion reaches the running sandboxes that use the
// credential at once (the gateway resets their connections that carried
// the old value), as it does through Vessel's own API.
Response RestApi::listSecrets(const Request& req, const std::string& tenant) {
  auto params = http::parseQuery(req.target(), {"limit", "nextToken"});
  if (!params.ok()) return errorJson(req, params.error());
  auto list = lifecycle_.egress().listCredentials(tenant);
  if (!list.ok()) return errorJson(req, list.error());
  json::array out;
  for (const auto& c : *list)
    if (c.name.rfind("e2b-rule-", 0) != 0) out.push_back(secretJson(c));
  return jsonBody(req, http::status::ok, out);
}

asio::awaitable<Response> RestApi::createSecret(const Request& req, std::string tenant) {
  auto in = parseSecret(req.body(), true);
  if (!in.ok()) co_return errorJson(req, in.error());
  auto have = lifecycle_.egress().credential(tenant, in->name);
  if (!have.ok()) co_return errorJson(req, have.error());
  if (*have)
    co_return errorJson(req, Error(Code::kAlreadyExists, "secret " + in->name + " already exists"));
  // A value without hosts or header: E2B places it with a network rule's
  // `${e2b.secrets.NAME}`; Vessel's own API can give it hosts and a header.
  ops::CredentialSpec c;
  c.name = in->name;
  c.value = in->value;
  auto put = co_await lifecycle_.egress().putCredential(tenant, c);
  if (!put.ok()) co_return errorJson(req, put.error());
  co_return jsonBody(req, http::status::created, secretJson(*put));
}

asio::awaitable<Response> RestApi::secret(const Request& req, std::string tenant,
                                          std::string name) {
  if (!secretName(name) || name.rfind("e2b-rule-", 0) == 0)
    co_return errorJson(req, Error(Code::kNotFound, "secret " + name.substr(0, 64) + " not found"));
  auto c = lifecycle_.egress().credential(tenant, name);
  if (!c.ok()) co_return errorJson(req, c.error());
  if (!*c) co_return errorJson(req, Error(Code::kNotFound, "secret " + name + " not found"));
  switch (req.method()) {
    case http::verb::get: co_return jsonBody(req, http::status::ok, secretJson(**c));
    case http::verb::delete_:
      if (auto s = co_await lifecycle_.egress().deleteCredential(tenant, name); !s.ok())
        co_return errorJson(req, s.error());
      co_return noContent(req);
    case http::verb::post: {
      auto in = parseSecret(req.body(), false);
      if (!in.ok()) co_return errorJson(req, in.error());
      // A new value; the hosts and header a Vessel credential has stay.
      ops::CredentialSpec up;
      up.name = name;
      up.header = (*c)->header;
      up.value = in->value;
      up.hosts = (*c)->hosts;
      auto put = co_await lifecycle_.egress().putCredential(tenant, up);
      if (!put.ok()) co_return errorJson(req, put.error());
      // E2B keeps a secret's creation time across updates.
      put->created_ms = (*c)->created_ms;
      co_return jsonBody(req, http::status::ok, secretJson(*put));
    }
    default: co_return errorJson(req, Error(Code::kNotFound, "no such secrets route"));
  }
}

}  // namespace vessel::e2b
