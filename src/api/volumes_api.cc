// Volumes: create, list, get, delete, clone and snapshot (volumes_api.h).
#include "api/volumes_api.h"

#include <boost/json.hpp>

#include "api/resources.h"
#include "base/log.h"
#include "base/new_id.h"

namespace vessel::api {

namespace json = boost::json;

namespace {

const Logger& log() {
  static const Logger l("volumes");
  return l;
}

json::object volumeJson(const store::VolumeRecord& v) {
  return json::object{{"id", v.id},
                      {"name", v.name},
                      {"size_mib", v.size_mib},
                      {"read_only", v.read_only},
                      {"source_id", v.source_id},
                      {"created_at", rfc3339(v.created_ms)}};
}

}  // namespace

Result<store::VolumeRecord> VolumesApi::find(const std::string& tenant, const std::string& name) {
  VESSEL_ASSIGN_OR_RETURN(auto v, store_.getVolume(tenant, name));
  if (!v) return Error(Code::kNotFound, "volume " + name + " does not exist");
  return std::move(*v);
}

// The routes of volumes_api.h. Creates, copies and deletes answer when the
// disk work is done (seconds for a copy of a full volume): no operation.
void VolumesApi::install(Router& r, const Authenticated& authed) {
  r.paramType("volume", [](std::string_view name) -> Status {
    if (auto c = name.find(':'); c != std::string_view::npos)
      return Error(Code::kNotFound, "no such volume method: " + std::string(name.substr(c + 1)));
    if (!validVolumeName(name)) return Error(Code::kInvalidArgument, "bad volume name");
    return okStatus();
  });
  using P = const Params&;
  auto sync =
      [&authed](std::function<Response(const Request&, const Params&, const std::string&)> h) {
        return authed(
            [h = std::move(h)](const Request& q, P p, std::string t) -> asio::awaitable<Response> {
              co_return h(q, p, t);
            });
      };
  r.post("/v1/volumes",
         authed([this](const Request& q, P, std::string t) { return create(q, std::move(t)); }));
  r.get("/v1/volumes",
        sync([this](const Request& q, P, const std::string& t) { return list(q, t); }));
  r.get("/v1/volumes/{name:volume}", authed([this](const Request& q, P p, std::string t) {
          return get(q, std::move(t), p["name"]);
        }));
  r.del("/v1/volumes/{name:volume}", authed([this](const Request& q, P p, std::string t) {
          return remove(q, std::move(t), p["name"]);
        }));
  r.post("/v1/volumes/{name:volume}:clone", authed([this](const Request& q, P p, std::string t) {
           return copy(q, std::move(t), p["name"], false);
         }));
  r.post("/v1/volumes/{name:volume}:snapshot", authed([this](const Request& q, P p, std::string t) {
           return copy(q, std::move(t), p["name"], true);
         }));
  installFiles(r, authed);
}

asio::awaitable<Response> VolumesApi::create(const Request& req, std::string tenant) {
  auto in = parseVolumeRequest(req.body(), true, limits_.min_mib, limits_.max_mib);
  if (!in.ok()) co_return errorResponse(req, in.error());
  auto v = co_await createVolume(std::move(tenant), std::move(in->name), in->size_mib);
  if (!v.ok()) co_return errorResponse(req, v.error());
  co_return jsonResponse(req, http::status::created, json::serialize(volumeJson(*v)));
}

Response VolumesApi::list(const Request& req, const std::string& tenant) {
  auto all = store_.listVolumes(tenant);
  if (!all.ok()) return errorResponse(req, all.error());
  json::array items;
  for (const auto& v : *all) items.push_back(volumeJson(v));
  return jsonResponse(req, http::status::ok,
                      json::serialize(json::object{{"volumes", std::move(items)}}));
}

asio::awaitable<Response> VolumesApi::get(const Request& req, std::string tenant,
                                          std::string name) {
  auto v = find(tenant, name);
  if (!v.ok()) co_return errorResponse(req, v.error());
  json::object o = volumeJson(*v);
  // Unmounted, or on a node that is down: the record alone.
  auto use = co_await keeper_.usage(*v);
  o["mounted"] = use.ok();
  if (use.ok()) {
    o["used_bytes"] = use->used_bytes;
    o["free_bytes"] = use->free_bytes;
  }
  co_return jsonResponse(req, http::status::ok, json::serialize(o));
}

asio::awaitable<Response> VolumesApi::remove(const Request& req, std::string tenant,
                                             std::string name) {
  auto q = parseQuery(req.target(), {"force"});
  if (!q.ok()) co_return errorResponse(req, q.error());
  bool force = false;
  if (q->count("force")) {
    const std::string& f = q->at("force");
    if (f != "true" && f != "false")
      co_return errorResponse(req, http::badRequest("force must be true or false"));
    force = f == "true";
  }
  Status gone = co_await deleteVolume(std::move(tenant), std::move(name), force);
  if (!gone.ok()) co_return errorResponse(req, gone.error());
  Response res{http::status::no_content, req.version()};
  res.set(http::field::server, "vessel");
  res.keep_alive(req.keep_alive());
  co_return res;
}

asio::awaitable<Status> VolumesApi::deleteVolume(std::string tenant, std::string name, bool force) {
  // Its node down: refused (503), its image would be left behind.
  auto v = find(tenant, name);
  if (!v.ok()) co_return std::move(v).error();
  if (auto s = keeper_.reachable(*v); !s.ok()) co_return s;
  // The record first: once it is gone no new mount can name the volume.
  auto gone = store_.deleteVolume(tenant, name, force);
  if (!gone.ok()) co_return gone.error();
  // Forced while sandboxes mount it: the keeper ends their mounts before
  // the image goes.
  Status s = co_await keeper_.remove(*gone);
  // Deleted for the tenant either way; an image left (its node down, say)
  // is set aside at its node's next start.
  if (!s.ok()) log().error("volume {} deleted, its image left: {}", gone->id, s.error().message());
  co_return okStatus();
}

asio::awaitable<Result<store::VolumeRecord>> VolumesApi::createVolume(std::string tenant,
                                                                      std::string name,
                                                                      uint64_t size_mib) {
  if (!validVolumeName(name)) co_return Error(Code::kInvalidArgument, "bad volume name " + name);
  if (size_mib < limits_.min_mib || size_mib > limits_.max_mib)
    co_return Error(Code::kInvalidArgument, "volume size out of range");
  store::VolumeRecord v;
  v.tenant_id = std::move(tenant);
  v.name = std::move(name);
  v.size_mib = size_mib;
  auto node = keeper_.place(v.size_mib);
  if (!node.ok()) co_return node.error();
  v.node = std::move(*node);
  // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
  std::optional<store::VolumeRecord> empty;
  co_return co_await makeVolume(std::move(v), std::move(empty));
}

asio::awaitable<Response> VolumesApi::copy(const Request& req, std::string tenant, std::string name,
                                           bool snapshot) {
  auto in = parseVolumeRequest(req.body(), false, limits_.min_mib, limits_.max_mib);
  if (!in.ok()) co_return errorResponse(req, in.error());
  auto src = find(tenant, name);
  if (!src.ok()) co_return errorResponse(req, src.error());
  store::VolumeRecord v;
  v.tenant_id = tenant;
  v.name = in->name;
  v.size_mib = src->size_mib;
  v.read_only = snapshot;
  v.source_id = src->id;
  v.node = src->node;  // a copy is made where its source is
  std::optional<store::VolumeRecord> from = std::move(*src);
  co_return co_await createImage(req, std::move(v), std::move(from));
}

// Admits the record (name, quota), then has the keeper make its image:
// empty, or a copy of `from`. A failed image takes its record back with it.
asio::awaitable<Response> VolumesApi::createImage(const Request& req, store::VolumeRecord v,
                                                  std::optional<store::VolumeRecord> from) {
  auto made = co_await makeVolume(std::move(v), std::move(from));
  if (!made.ok()) co_return errorResponse(req, made.error());
  co_return jsonResponse(req, http::status::created, json::serialize(volumeJson(*made)));
}

asio::awaitable<Result<store::VolumeRecord>> VolumesApi::makeVolume(
    store::VolumeRecord v, std::optional<store::VolumeRecord> from) {
  v.id = newId("vol");
  v.created_ms = store::nowMs();
  if (auto s = store_.insertVolume(v, limits_.tenant_max_mib); !s.ok()) co_return s.error();
  Status made = okStatus();
  // g++ 12: named arguments, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
  store::VolumeRecord made_v = v;
  if (from)
    made = co_await keeper_.copy(std::move(*from), std::move(made_v));
  else
    made = co_await keeper_.create(std::move(made_v));
  if (!made.ok()) {
    if (auto undo = store_.deleteVolume(v.tenant_id, v.name, true); !undo.ok())
      log().error("volume {}: {}", v.id, undo.error().message());
    co_return made.error();
  }
  log().info("volume {} ({} MiB{}) made for tenant {}{}", v.id, v.size_mib,
             v.read_only ? ", read-only" : "", v.tenant_id,
             v.node.empty() ? std::string() : " on node " + v.node);
  co_return v;
}

}  // namespace vessel::api
