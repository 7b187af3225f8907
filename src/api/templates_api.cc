// Templates through the API: POST /v1/templates builds one from a build
// spec as an operation with progress events (template.progress, then
// template.built), POST /v1/sandboxes/{id}:fork {"template": NAME} makes one
// from a running sandbox, GET /v1/templates lists the built-in templates and
// the tenant's own. Builds run on the TemplateWorker's thread; their callbacks
// come back to the io thread, where every store write happens.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <filesystem>

#include "api/api_log.h"
#include "api/control_plane.h"
#include "api/resources.h"
#include "base/log.h"

namespace vessel::api {

namespace json = boost::json;
using ops::OpState;

void ControlPlane::enableTemplateBuilds(TemplateBuildEnv env) {
  builder_ = std::make_unique<TemplateWorker>(std::move(env));
}

void ControlPlane::stopTemplateBuilds() {
  builder_.reset();  // joins the build thread; an unfinished build unwinds
  auto ops = std::move(builds_in_flight_);
  builds_in_flight_.clear();
  for (auto& [id, op] : ops) {
    Error e(Code::kUnavailable, "vesseld stopped during the build");
    lifecycle_.operations().set(op, OpState::kFailed, &e);
  }
}

Response ControlPlane::buildTemplate(const Request& req, const std::string& tenant) {
  if (!builder_)
    return errorResponse(req,
                         Error(Code::kUnavailable, "template builds are not enabled on this node"));
  auto spec = templates::parseBuildSpec(req.body());
  if (!spec.ok()) return errorResponse(req, spec.error());
  std::string name = spec->name;
  if (auto s = lifecycle_.checkNewTemplateName(name); !s.ok()) return errorResponse(req, s.error());
  auto base = lifecycle_.resolveTemplate(tenant, spec->base);
  if (!base.ok()) return errorResponse(req, base.error().withContext("base"));
  auto bt = templates_.open(*base);
  if (!bt.ok()) {
    if (bt.error().code() == Code::kNotFound)
      return errorResponse(
          req, Error(Code::kNotFound, "base template '" + spec->base + "' does not exist"));
    log().error("open base template {}: {}", *base, bt.error().message());
    return errorResponse(
        req, Error(Code::kUnavailable, "base template '" + spec->base + "' is not usable"));
  }

  auto op = lifecycle_.operations().begin(tenant, "", "build");
  if (!op.ok()) return errorResponse(req, op.error());
  builds_in_flight_[op->id] = *op;
  TemplateWorker::Job job;
  job.spec = *spec;
  job.spec.name = tenantTemplateName(tenant, name);
  // The base is the base template's disk as it was snapshotted; the
  // build boots it afresh.
  job.base_image = (*bt)->path(templates::kRootfsFile);
  std::weak_ptr<bool> alive = alive_;
  std::string op_id = op->id;
  job.progress = [this, alive, op_id, name](const std::string& step, int percent) {
    asio::post(io_, [this, alive, op_id, name, step, percent] {
      if (alive.expired()) return;
      auto it = builds_in_flight_.find(op_id);
      if (it == builds_in_flight_.end()) return;
      store::OperationRecord& o = it->second;
      if (o.state == OpState::kPending) lifecycle_.operations().set(o, OpState::kRunning);
      json::object d{{"template", name}, {"step", step}, {"percent", percent}};
      lifecycle_.operations().publish(
          {0, o.tenant_id, o.id, "", "template.progress", json::serialize(d)});
    });
  };
  job.done = [this, alive, op_id, name](Result<templates::Manifest> r) {
    asio::post(io_, [this, alive, op_id, name, r = std::move(r)] {
      if (alive.expired()) return;
      auto it = builds_in_flight_.find(op_id);
      if (it == builds_in_flight_.end()) return;
      store::OperationRecord o = it->second;
      builds_in_flight_.erase(it);
      if (o.state == OpState::kPending) lifecycle_.operations().set(o, OpState::kRunning);
      if (!r.ok()) {
        log().warn("template build {} failed: {}", name, r.error().message());
        // The tenant knows its template by its own name, not the stored one.
        std::string msg = r.error().context();
        std::string stored = tenantTemplateName(o.tenant_id, name);
        for (size_t at; (at = msg.find(stored)) != std::string::npos;)
          msg.replace(at, stored.size(), name);
        Error e(r.error().code(), msg, r.error().sysErrno());
        lifecycle_.operations().set(o, OpState::kFailed, &e);
        return;
      }
      lifecycle_.operations().publish({0, o.tenant_id, o.id, "", "template.built",
                                       json::serialize(ops::templateJson(*r, name, false))});
      lifecycle_.operations().set(o, OpState::kDone);
      lifecycle_.collectTemplates();
    });
  };
  if (auto s = builder_->submit(std::move(job)); !s.ok()) {
    auto it = builds_in_flight_.find(op_id);
    if (it != builds_in_flight_.end()) {
      lifecycle_.operations().set(it->second, OpState::kFailed, &s.error());
      builds_in_flight_.erase(it);
    }
    return errorResponse(req, s.error());
  }
  json::object o{{"operation", operationJson(*op)}, {"template", json::object{{"name", name}}}};
  return jsonResponse(req, http::status::accepted, json::serialize(o));
}

Response ControlPlane::listTemplates(const Request& req, const std::string& tenant) {
  // The newest version of every name the tenant can use.
  std::map<std::string, std::pair<templates::Manifest, bool>> newest;
  for (auto& m : templates_.list()) {
    auto visible = visibleTemplateName(tenant, m.name);
    if (!visible) continue;
    auto it = newest.find(*visible);
    if (it != newest.end() && it->second.first.created_at >= m.created_at) continue;
    bool builtin = builtinTemplateName(m.name);
    newest[*visible] = {std::move(m), builtin};
  }
  json::array items;
  for (const auto& [name, mb] : newest)
    items.push_back(ops::templateJson(mb.first, name, mb.second));
  json::object o{{"templates", std::move(items)}};
  return jsonResponse(req, http::status::ok, json::serialize(o));
}

}  // namespace vessel::api
