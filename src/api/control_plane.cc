#include "api/control_plane.h"

#include <boost/json.hpp>

#include "api/api_log.h"
#include "api/auth.h"
#include "api/resources.h"
#include "base/log.h"

namespace vessel::api {

namespace json = boost::json;

namespace {

// "/a/b:c" -> {"a", "b:c"}; empty segments are kept so "//" is rejected.
std::vector<std::string> splitPath(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 1;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

Response okJson(const Request& req, const json::object& o) {
  return jsonResponse(req, http::status::ok, json::serialize(o));
}

}  // namespace

ControlPlane::ControlPlane(asio::io_context& io, store::Store& store, ops::Lifecycle& lifecycle,
                           templates::TemplateStore& templates)
    : io_(io), store_(store), lifecycle_(lifecycle), templates_(templates), network_(lifecycle) {}

ControlPlane::~ControlPlane() = default;

void ControlPlane::install(HttpServer& server) {
  server.routePrefix("/v1/", [this](const Request& req, boost::beast::tcp_stream& stream) {
    return handle(req, stream);
  });
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

asio::awaitable<std::optional<Response>> ControlPlane::handle(const Request& req,
                                                              boost::beast::tcp_stream& stream) {
  auto tenant = authenticate(req, store_);
  if (!tenant.ok()) co_return errorResponse(req, tenant.error());
  std::string path(req.target());
  if (auto q = path.find('?'); q != std::string::npos) path.resize(q);
  auto seg = splitPath(path);  // seg[0] == "v1"
  auto method = req.method();
  if (auto r = co_await network_.handle(req, *tenant, seg)) co_return std::move(*r);
  auto notAllowed = [&](std::string_view allow) { return methodNotAllowed(req, path, allow); };

  if (seg.size() == 2 && seg[1] == "sandboxes") {
    if (method == http::verb::post) co_return createSandbox(req, *tenant);
    if (method == http::verb::get) co_return listSandboxes(req, *tenant);
    co_return notAllowed("GET, POST");
  }
  if (seg.size() == 2 && seg[1] == "templates") {
    if (method == http::verb::post) co_return buildTemplate(req, *tenant);
    if (method == http::verb::get) co_return listTemplates(req, *tenant);
    co_return notAllowed("GET, POST");
  }
  if (seg.size() == 3 && seg[1] == "sandboxes") {
    std::string id = seg[2], verb;
    if (auto c = id.find(':'); c != std::string::npos) {
      verb = id.substr(c + 1);
      id.resize(c);
    }
    if (!validId(id)) co_return errorResponse(req, Error(Code::kInvalidArgument, "bad sandbox id"));
    if (verb.empty()) {
      if (method == http::verb::get) {
        auto sb = lifecycle_.get(*tenant, id);
        if (!sb.ok()) co_return errorResponse(req, sb.error());
        co_return okJson(req, sandboxJson(*sb));
      }
      if (method == http::verb::delete_)
        co_return answer(req, *tenant, id, lifecycle_.remove(*tenant, id));
      co_return notAllowed("GET, DELETE");
    }
    if (method != http::verb::post) co_return notAllowed("POST");
    if (verb == "pause") co_return answer(req, *tenant, id, lifecycle_.pause(*tenant, id));
    if (verb == "resume") co_return answer(req, *tenant, id, lifecycle_.resume(*tenant, id));
    if (verb == "fork") co_return forkSandbox(req, *tenant, id);
    if (verb == "extend") co_return extendSandbox(req, *tenant, id);
    co_return errorResponse(req, Error(Code::kNotFound, "no such sandbox method: " + verb));
  }
  if (seg.size() == 4 && seg[1] == "sandboxes" && seg[3] == "sessions" && sessions_) {
    if (!validId(seg[2]))
      co_return errorResponse(req, Error(Code::kInvalidArgument, "bad sandbox id"));
    if (method != http::verb::post) co_return notAllowed("POST");
    co_return sessions_->create(req, *tenant, seg[2]);
  }
  if (seg.size() >= 3 && seg.size() <= 4 && seg[1] == "operations") {
    if (!validId(seg[2]))
      co_return errorResponse(req, Error(Code::kInvalidArgument, "bad operation id"));
    if (method != http::verb::get) co_return notAllowed("GET");
    if (seg.size() == 3) {
      auto op = lifecycle_.getOperation(*tenant, seg[2]);
      if (!op.ok()) co_return errorResponse(req, op.error());
      co_return okJson(req, operationJson(*op));
    }
    if (seg[3] == "events") co_return co_await streamEvents(req, stream, *tenant, seg[2]);
  }
  if (seg.size() == 2 && seg[1] == "events") {
    if (method != http::verb::get) co_return notAllowed("GET");
    co_return co_await streamEvents(req, stream, *tenant, "");
  }
  co_return errorResponse(req, Error(Code::kNotFound, "no such endpoint: " + path));
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
  c.metadata_json = json::serialize(in->metadata);
  c.network = std::move(in->network);
  c.cold = in->cold;
  c.timeout_s = in->timeout_s;
  c.lifetime_s = in->lifetime_s;
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
  auto r = lifecycle_.fork(tenant, id, in->count);
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
