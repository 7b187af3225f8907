// Reads beside the sandboxes' records: a sandbox's resource use as its
// node measures it (GET /v1/sandboxes/{id}/metrics, any key of its
// tenant), and the nodes (GET /v1/nodes, operator keys only). What the
// console's lists and Operator page show (docs/console.md).
#include <boost/json.hpp>

#include "api/control_plane.h"
#include "api/resources.h"
#include "ops/events.h"

namespace vessel::api {

namespace json = boost::json;

namespace {

json::object nodeJson(const store::NodeRecord& n) {
  json::array templates;
  for (const auto& t : n.templates) templates.push_back(json::string(t));
  json::object o{{"name", n.name},
                 {"state", n.lost ? "lost" : "ready"},
                 {"sandboxes", n.sandboxes},
                 {"memory_mib", n.memory_mib},
                 {"memory_free_mib", n.memory_free_mib},
                 {"vcpus", n.vcpus},
                 {"accel", n.accel},
                 {"templates", std::move(templates)}};
  if (n.heartbeat_ms > 0) o["heartbeat_at"] = ops::rfc3339(n.heartbeat_ms);
  return o;
}

json::object usageJson(const ops::Usage& u) {
  return json::object{{"cpu_count", u.cpu_count},
                      {"cpu_used_pct", u.cpu_used_pct},
                      {"mem_used_bytes", u.mem_used_bytes},
                      {"mem_total_bytes", u.mem_total_bytes},
                      {"disk_used_bytes", u.disk_used_bytes},
                      {"disk_total_bytes", u.disk_total_bytes}};
}

}  // namespace

void ControlPlane::installReads(Router& r, const Authenticated& authed) {
  r.get("/v1/nodes", authed([this](const Request& req, const Params&,
                                   std::string tenant) -> asio::awaitable<Response> {
          if (!operators_.count(tenant) || !nodes_)
            co_return errorResponse(
                req, Error(Code::kPermissionDenied,
                           "only an operator's key lists nodes (vesseld --operator-tenant)"));
          auto nodes = nodes_();
          if (!nodes.ok()) co_return errorResponse(req, nodes.error());
          json::array items;
          for (const auto& n : *nodes) items.push_back(nodeJson(n));
          co_return jsonResponse(req, http::status::ok,
                                 json::serialize(json::object{{"nodes", std::move(items)}}));
        }));
  // Measured now on its node: the VM's CPU since the previous sample, its
  // resident memory, its disk overlay. A sandbox without a VM is 409.
  r.get("/v1/sandboxes/{id:sandbox}/metrics",
        authed([this](const Request& req, const Params& p,
                      std::string tenant) -> asio::awaitable<Response> {
          std::string id = p["id"];
          auto u = co_await lifecycle_.usage(tenant, id);
          if (!u.ok()) co_return refusal(req, tenant, id, u.error());
          json::object o = usageJson(*u);
          o["timestamp"] = ops::rfc3339(lifecycle_.clock().nowMs());
          co_return jsonResponse(req, http::status::ok, json::serialize(o));
        }));
}

}  // namespace vessel::api
