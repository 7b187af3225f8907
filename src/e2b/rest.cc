// The E2B REST API's route table, its authentication and its answers'
// shapes. The sandbox routes are in rest_sandboxes.cc, their objects in
// rest_render.cc, the header rules' credentials in rest_rules.cc;
// snapshots, templates and secrets in rest_templates.cc.
#include "e2b/rest.h"

#include <boost/json.hpp>

#include "e2b/rest_states.h"

namespace vessel::e2b {

namespace json = boost::json;

namespace {

// Sandbox ids as Vessel makes them; anything else is a sandbox E2B has not.
bool validId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

// The key: E2B's X-API-Key, else a bearer token.
std::optional<std::string_view> apiKey(const Request& req) {
  if (auto it = req.find("X-API-Key"); it != req.end()) {
    std::string_view v = it->value();
    if (v.empty() || v.size() > 512) return std::nullopt;
    return v;
  }
  return http::bearerToken(req);
}

}  // namespace

Response jsonBody(const Request& req, http::status status, const json::value& v) {
  return http::jsonResponse(req, status, json::serialize(v));
}

Response errorJson(const Request& req, const Error& e) {
  http::status st = http::statusForCode(e.code());
  return jsonBody(req, st, json::object{{"code", static_cast<int>(st)}, {"message", e.message()}});
}

json::array volumeMountsJson(const std::vector<VolumeMount>& mounts) {
  json::array a;
  for (const auto& m : mounts) a.push_back(json::object{{"name", m.name}, {"path", m.path}});
  return a;
}

Response noContent(const Request& req) {
  Response res{http::status::no_content, req.version()};
  res.keep_alive(req.keep_alive());
  res.prepare_payload();
  return res;
}

Result<std::string> RestApi::tenantOf(const Request& req) {
  auto key = apiKey(req);
  if (!key) return Error(Code::kUnauthenticated, "missing X-API-Key");
  return tenant_for_key_(*key);
}

// E2B's routes, v1 (SDK <= 2.45) and v2 (2.46+). Every one but /health
// authenticates first; so does every refusal of the router's own (the
// guard), which are E2B's error bodies. Over 80 lines because it is the
// table: one entry per route E2B's SDKs call, read in one place.
void RestApi::install(http::HttpServer& server) {
  http::Router& r = server.router();
  r.errorsUnder("/", errorJson);
  r.guardUnder("/", [this](const Request& req) -> std::optional<Response> {
    auto tenant = tenantOf(req);
    if (!tenant.ok()) return errorJson(req, tenant.error());
    return std::nullopt;
  });
  r.paramType("sandbox", [](std::string_view id) -> Status {
    if (!validId(id)) return notFound(std::string(id));
    return okStatus();
  });
  r.get("/health", [](const Request& req, const http::Params&) -> asio::awaitable<Response> {
    co_return jsonBody(req, http::status::ok, json::object{{"status", "ok"}});
  });
  // A handler of (request, tenant, parameters) behind the tenant's key.
  using Tenanted =
      std::function<asio::awaitable<Response>(const Request&, std::string, const http::Params&)>;
  auto authed = [this](Tenanted h) -> http::RouteHandler {
    return [this, h = std::move(h)](const Request& req,
                                    const http::Params& p) -> asio::awaitable<Response> {
      auto tenant = tenantOf(req);
      if (!tenant.ok()) co_return errorJson(req, tenant.error());
      co_return co_await h(req, std::move(*tenant), p);
    };
  };
  auto now =
      [authed](std::function<Response(const Request&, const std::string&, const http::Params&)> h) {
        return authed([h = std::move(h)](const Request& req, std::string tenant,
                                         const http::Params& p) -> asio::awaitable<Response> {
          co_return h(req, tenant, p);
        });
      };
  using T = std::string;
  using P = const http::Params&;
  using CT = const std::string&;
  for (bool v2 : {false, true}) {
    std::string at = v2 ? "/v2/sandboxes" : "/sandboxes";
    r.post(at,
           authed([this, v2](const Request& q, T t, P) { return create(q, std::move(t), v2); }));
    r.get(at, now([this, v2](const Request& q, CT t, P) { return list(q, t, v2); }));
  }
  r.post("/v2/sandboxes/{id:sandbox}/connect", authed([this](const Request& q, T t, P p) {
           return connect(q, std::move(t), p["id"], true, false);
         }));
  // Before /sandboxes/{id}: "metrics" would be a valid id.
  r.get("/sandboxes/metrics", now([](const Request& q, CT, P) {
          return jsonBody(q, http::status::ok, json::object{{"sandboxes", json::object()}});
        }));
  r.get("/sandboxes/{id:sandbox}", now([this](const Request& q, CT t, P p) {
          const std::string& id = p["id"];
          auto sb = lifecycle_.get(t, id);
          if (!sb.ok()) return errorJson(q, sb.error());
          if (!running(sb->state) && !paused(sb->state)) return errorJson(q, notFound(id));
          json::object o = listedJson(*sb, true);
          o["volumeMounts"] = volumeMountsJson(mountsOf(t)[id]);
          return jsonBody(q, http::status::ok, o);
        }));
  r.del("/sandboxes/{id:sandbox}",
        authed([this](const Request& q, T t, P p) { return kill(q, std::move(t), p["id"]); }));
  r.post("/sandboxes/{id:sandbox}/pause",
         authed([this](const Request& q, T t, P p) { return pause(q, std::move(t), p["id"]); }));
  r.post("/sandboxes/{id:sandbox}/resume", authed([this](const Request& q, T t, P p) {
           return connect(q, std::move(t), p["id"], false, true);
         }));
  r.post("/sandboxes/{id:sandbox}/connect", authed([this](const Request& q, T t, P p) {
           return connect(q, std::move(t), p["id"], false, false);
         }));
  r.post("/sandboxes/{id:sandbox}/timeout",
         now([this](const Request& q, CT t, P p) { return setTimeout(q, t, p["id"]); }));
  r.post("/sandboxes/{id:sandbox}/refreshes",
         now([this](const Request& q, CT t, P p) { return refresh(q, t, p["id"]); }));
  r.post("/sandboxes/{id:sandbox}/fork",
         authed([this](const Request& q, T t, P p) { return fork(q, std::move(t), p["id"]); }));
  r.post("/sandboxes/{id:sandbox}/snapshots", authed([this](const Request& q, T t, P p) {
           return createSnapshot(q, std::move(t), p["id"]);
         }));
  r.put("/sandboxes/{id:sandbox}/network", authed([this](const Request& q, T t, P p) {
          return updateNetwork(q, std::move(t), p["id"]);
        }));
  r.get("/sandboxes/{id:sandbox}/metrics",
        authed([this](const Request& q, T t, P p) { return metrics(q, std::move(t), p["id"]); }));
  r.get("/sandboxes/{id:sandbox}/logs",
        now([this](const Request& q, CT t, P p) { return logs(q, t, p["id"], false); }));
  r.get("/v2/sandboxes/{id:sandbox}/logs",
        now([this](const Request& q, CT t, P p) { return logs(q, t, p["id"], true); }));
  r.get("/snapshots", now([this](const Request& q, CT t, P) { return listSnapshots(q, t); }));
  // The template builder (rest_builds.cc); /templates/tags before
  // /templates/{template}, which would take "tags" as a name.
  builds_ = makeBuilds();
  r.post("/v3/templates",
         authed([this](const Request& q, T t, P) { return requestBuild(q, std::move(t)); }));
  r.get("/templates/{template}/files/{hash}", now([this](const Request& q, CT t, P p) {
          return fileUploadLink(q, t, p["template"], p["hash"]);
        }));
  r.addUpload(http::verb::put, "/templates/{template}/files/{hash}", kMaxUploadBytes,
              [this](const Request& q, P p, http::BodyReader& b) { return uploadFiles(q, p, b); });
  r.post("/v2/templates/{template}/builds/{build}", now([this](const Request& q, CT t, P p) {
           return startBuild(q, t, p["template"], p["build"]);
         }));
  for (bool logs : {false, true})
    r.get(logs ? "/templates/{template}/builds/{build}/logs"
               : "/templates/{template}/builds/{build}/status",
          now([this, logs](const Request& q, CT t, P p) {
            return buildStatus(q, t, p["template"], p["build"], logs);
          }));
  r.get("/templates/{template}/tags",
        now([this](const Request& q, CT t, P p) { return tags(q, t, p["template"]); }));
  r.post("/templates/tags",
         now([this](const Request& q, CT t, P) { return assignTags(q, t, true); }));
  r.del("/templates/tags",
        now([this](const Request& q, CT t, P) { return assignTags(q, t, false); }));
  r.get("/templates", now([this](const Request& q, CT t, P) { return listTemplates(q, t); }));
  r.del("/templates/{template}",
        now([this](const Request& q, CT t, P p) { return deleteTemplate(q, t, p["template"]); }));
  r.get("/templates/aliases/{alias}",
        now([this](const Request& q, CT t, P p) { return templateAlias(q, t, p["alias"]); }));
  r.get("/secrets", now([this](const Request& q, CT t, P) { return listSecrets(q, t); }));
  r.post("/secrets",
         authed([this](const Request& q, T t, P) { return createSecret(q, std::move(t)); }));
  for (http::verb m : {http::verb::get, http::verb::post, http::verb::delete_})
    r.add(m, "/secrets/{name}", authed([this](const Request& q, T t, P p) {
            return secret(q, std::move(t), p["name"]);
          }));
  installVolumes(r);
}

}  // namespace vessel::e2b
