// Templates through the API: POST /v1/templates builds one from a build
// spec as an operation with progress events (template.progress, then
// template.built), POST /v1/sandboxes/{id}:fork {"template": NAME} makes one
// from a running sandbox, GET /v1/templates lists the built-in templates and
// the tenant's own. A build is the lifecycle's operation (ops::Lifecycle::
// buildTemplate); the node runs it.
#include <boost/json.hpp>

#include "api/control_plane.h"
#include "api/resources.h"
#include "templates/build_spec.h"

namespace vessel::api {

namespace json = boost::json;

Response ControlPlane::buildTemplate(const Request& req, const std::string& tenant) {
  auto spec = templates::parseBuildSpec(req.body());
  if (!spec.ok()) return errorResponse(req, spec.error());
  std::string name = spec->name;
  auto op = lifecycle_.buildTemplate(tenant, std::move(*spec));
  if (!op.ok()) return errorResponse(req, op.error());
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
