#include "api/control_plane.h"

#include <boost/json.hpp>

#include "api/api_log.h"
#include "api/auth.h"
#include "api/resources.h"
#include "base/log.h"

namespace vessel::api {

namespace json = boost::json;

namespace {

Response okJson(const Request& req, const json::object& o) {
  return jsonResponse(req, http::status::ok, json::serialize(o));
}

}  // namespace

ControlPlane::ControlPlane(asio::io_context& io, store::Store& store, ops::Lifecycle& lifecycle,
                           templates::TemplateStore& templates)
    : io_(io),
      store_(store),
      lifecycle_(lifecycle),
      templates_(templates),
      network_(lifecycle),
      workers_(std::make_unique<asio::thread_pool>(1)) {}

ControlPlane::~ControlPlane() = default;

// The route table of /v1/ (api/openapi.yaml). Every route authenticates
// its tenant first; the router's own 404 and 405 come after the same check
// (the guard), so a caller without a key learns nothing of the paths.
// Over 80 lines because it is the table: one entry per route, in the order
// of api/openapi.yaml, read in one place.
void ControlPlane::install(HttpServer& server) {
  Router& r = server.router();
  r.paramType("sandbox", [](std::string_view id) -> Status {
    // "{id}:<method>" with a method no route has: no such method, as before.
    if (auto c = id.find(':'); c != std::string_view::npos)
      return Error(Code::kNotFound, "no such sandbox method: " + std::string(id.substr(c + 1)));
    if (!validId(id)) return Error(Code::kInvalidArgument, "bad sandbox id");
    return okStatus();
  });
  r.paramType("operation", [](std::string_view id) -> Status {
    if (!validId(id)) return Error(Code::kInvalidArgument, "bad operation id");
    return okStatus();
  });
  r.guardUnder("/v1/", [this](const Request& req) -> std::optional<Response> {
    auto tenant = authenticate(req, store_);
    if (!tenant.ok()) return errorResponse(req, tenant.error());
    return std::nullopt;
  });
  Authenticated authed = [this](TenantHandler h) -> RouteHandler {
    return
        [this, h = std::move(h)](const Request& req, const Params& p) -> asio::awaitable<Response> {
          auto tenant = authenticate(req, store_);
          if (!tenant.ok()) co_return errorResponse(req, tenant.error());
          co_return co_await h(req, p, std::move(*tenant));
        };
  };
  auto sync =
      [this, authed](std::function<Response(const Request&, const Params&, const std::string&)> h) {
        return authed([this, h = std::move(h)](const Request& req, const Params& p,
                                               std::string tenant) -> asio::awaitable<Response> {
          // The operations it begins name this request (h does not suspend).
          co_return lifecycle_.operations().forRequest(std::string(req["X-Request-Id"]),
                                                       [&] { return h(req, p, tenant); });
        });
      };
  using P = const Params&;
  using T = const std::string&;
  r.post("/v1/sandboxes", sync([this](const Request& q, P, T t) { return createSandbox(q, t); }));
  r.get("/v1/sandboxes", sync([this](const Request& q, P, T t) { return listSandboxes(q, t); }));
  r.post("/v1/templates", sync([this](const Request& q, P, T t) { return buildTemplate(q, t); }));
  r.addUpload(
      http::verb::post, "/v1/templates:dockerfile", max_context_,
      [this](const Request& q, P, http::BodyReader& b) { return buildFromDockerfile(q, b); });
  r.get("/v1/templates", sync([this](const Request& q, P, T t) { return listTemplates(q, t); }));
  r.del("/v1/templates/{name}", sync([this](const Request& q, P p, T t) {
          auto s = lifecycle_.deleteTemplate(t, p["name"]);
          if (!s.ok()) return errorResponse(q, s.error());
          return jsonResponse(q, http::status::no_content, "");
        }));
  r.get("/v1/sandboxes/{id:sandbox}", sync([this](const Request& q, P p, T t) {
          auto sb = lifecycle_.get(t, p["id"]);
          if (!sb.ok()) return errorResponse(q, sb.error());
          return okJson(q, sandboxJson(*sb));
        }));
  r.del("/v1/sandboxes/{id:sandbox}", sync([this](const Request& q, P p, T t) {
          return answer(q, t, p["id"], lifecycle_.remove(t, p["id"]));
        }));
  r.post("/v1/sandboxes/{id:sandbox}:pause", sync([this](const Request& q, P p, T t) {
           auto memory = parsePauseRequest(q.body());
           if (!memory.ok()) return errorResponse(q, memory.error());
           return answer(q, t, p["id"], lifecycle_.pause(t, p["id"], *memory));
         }));
  r.post("/v1/sandboxes/{id:sandbox}:resume", sync([this](const Request& q, P p, T t) {
           return answer(q, t, p["id"], lifecycle_.resume(t, p["id"]));
         }));
  r.post("/v1/sandboxes/{id:sandbox}:fork",
         sync([this](const Request& q, P p, T t) { return forkSandbox(q, t, p["id"]); }));
  r.post("/v1/sandboxes/{id:sandbox}:extend",
         sync([this](const Request& q, P p, T t) { return extendSandbox(q, t, p["id"]); }));
  r.post("/v1/sandboxes/{id:sandbox}/sessions", sync([this](const Request& q, P p, T t) {
           if (!sessions_)
             return errorResponse(
                 q, Error(Code::kNotFound, "no such endpoint: " + std::string(q.target())));
           return sessions_->create(q, t, p["id"]);
         }));
  r.get("/v1/operations/{op:operation}", sync([this](const Request& q, P p, T t) {
          auto op = lifecycle_.getOperation(t, p["op"]);
          if (!op.ok()) return errorResponse(q, op.error());
          return okJson(q, operationJson(*op));
        }));
  // Event streams own their connection.
  auto events = [this](bool of_operation) {
    return [this, of_operation](
               const Request& req, const Params& p,
               boost::beast::tcp_stream& stream) -> asio::awaitable<std::optional<Response>> {
      auto tenant = authenticate(req, store_);
      if (!tenant.ok()) co_return errorResponse(req, tenant.error());
      std::string op = of_operation ? p["op"] : std::string();
      co_return co_await streamEvents(req, stream, *tenant, std::move(op));
    };
  };
  r.addStream(http::verb::get, "/v1/operations/{op:operation}/events", events(true));
  r.addStream(http::verb::get, "/v1/events", events(false));
  r.addStream(http::verb::get, "/v1/sandboxes/{id:sandbox}/logs",
              [this](const Request& req, const Params& p,
                     boost::beast::tcp_stream& stream) -> asio::awaitable<std::optional<Response>> {
                auto tenant = authenticate(req, store_);
                if (!tenant.ok()) co_return errorResponse(req, tenant.error());
                std::string id = p["id"];
                co_return co_await sandboxLogs(req, stream, *tenant, std::move(id));
              });
  network_.install(r, authed);
  if (volumes_) volumes_->install(r, authed);
  installReads(r, authed);
}

Response ControlPlane::refusal(const Request& req, const std::string& tenant, const std::string& id,
                               const Error& e) {
  // A request the sandbox's state does not allow says which state it is in.
  if (e.code() == Code::kFailedPrecondition && !id.empty())
    if (auto sb = lifecycle_.get(tenant, id); sb.ok())
      return errorResponse(req, e, json::object{{"state", std::string(ops::stateName(sb->state))}});
  return errorResponse(req, e);
}

Response ControlPlane::answer(const Request& req, const std::string& tenant, const std::string& id,
                              const Result<ops::Accepted>& r) {
  if (!r.ok()) return refusal(req, tenant, id, r.error());
  json::object o{{"sandbox", sandboxJson(r->sandbox)}, {"operation", operationJson(r->operation)}};
  return jsonResponse(req, http::status::accepted, json::serialize(o));
}

Response ControlPlane::createSandbox(const Request& req, const std::string& tenant) {
  auto in = parseCreateRequest(req.body());
  if (!in.ok()) return errorResponse(req, in.error());
  ops::CreateRequest c;
  c.tenant = tenant;
  c.template_name = in->template_name;
  c.vcpus = in->vcpus;
  c.memory_mib = in->memory_mib;
  c.disk_mib = in->disk_mib;
  c.env = std::move(in->env);
  // Checked at parse: an object of strings.
  for (const auto& [k, v] : in->metadata)
    if (v.is_string()) c.metadata.emplace(std::string(k), std::string(v.as_string()));
  c.network = std::move(in->network);
  c.cold = in->cold;
  c.timeout_s = in->timeout_s;
  c.lifetime_s = in->lifetime_s;
  c.pause_on_timeout = in->pause_on_timeout;
  c.pause_memory = in->pause_memory;
  c.auto_resume = in->auto_resume;
  for (auto& v : in->volumes)
    c.volumes.push_back({"", std::move(v.name), std::move(v.path), v.read_only});
  auto r = lifecycle_.create(c);
  return answer(req, tenant, "", r);
}

Response ControlPlane::listSandboxes(const Request& req, const std::string& tenant) {
  auto q = parseListQuery(req.target());
  if (!q.ok()) return errorResponse(req, q.error());
  ops::ListRequest l;
  l.tenant = tenant;
  l.page_size = q->page_size;
  l.page_token = q->page_token;
  l.metadata = q->metadata;
  auto page = lifecycle_.list(l);
  if (!page.ok()) return errorResponse(req, page.error());
  json::array items;
  for (const auto& s : page->sandboxes) items.push_back(sandboxJson(s));
  return okJson(req, json::object{{"sandboxes", std::move(items)},
                                  {"next_page_token", page->next_page_token}});
}

Response ControlPlane::forkSandbox(const Request& req, const std::string& tenant,
                                   const std::string& id) {
  auto in = parseForkRequest(req.body());
  if (!in.ok()) return errorResponse(req, in.error());
  if (!in->template_name.empty()) {
    auto r = lifecycle_.forkToTemplate(tenant, id, in->template_name);
    if (!r.ok()) return refusal(req, tenant, id, r.error());
    json::object o{{"sandbox", sandboxJson(r->sandbox)},
                   {"operation", operationJson(r->operation)},
                   {"template", json::object{{"name", in->template_name}}}};
    return jsonResponse(req, http::status::accepted, json::serialize(o));
  }
  auto r = lifecycle_.fork(tenant, id, in->count, in->clone_volumes);
  if (!r.ok()) return refusal(req, tenant, id, r.error());
  json::array copies;
  for (const auto& c : r->copies) copies.push_back(sandboxJson(c));
  json::object o{{"sandbox", sandboxJson(r->sandbox)},
                 {"operation", operationJson(r->operation)},
                 {"sandboxes", std::move(copies)}};
  return jsonResponse(req, http::status::accepted, json::serialize(o));
}

Response ControlPlane::extendSandbox(const Request& req, const std::string& tenant,
                                     const std::string& id) {
  auto in = parseExtendRequest(req.body());
  if (!in.ok()) return errorResponse(req, in.error());
  auto r = lifecycle_.extend(tenant, id, in->timeout_s, in->lifetime_s);
  if (!r.ok()) return refusal(req, tenant, id, r.error());
  return okJson(req, sandboxJson(*r));
}

}  // namespace vessel::api
