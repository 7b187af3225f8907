// Volumes: create, list, get, delete, clone and snapshot (volumes_api.h).
#include "api/volumes_api.h"

#include <boost/json.hpp>
#include <set>

#include "api/resources.h"
#include "base/log.h"
#include "base/new_id.h"
#include "base/offload.h"

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

VolumesApi::VolumesApi(store::Store& store, volumes::VolumeHost* host, VolumeLimits limits,
                       std::string node)
    : store_(store),
      host_(host),
      limits_(limits),
      node_(std::move(node)),
      disk_(std::make_unique<asio::thread_pool>(1)),
      files_(std::make_unique<asio::thread_pool>(2)) {}

VolumesApi::~VolumesApi() {
  files_->join();
  disk_->join();
}

Status VolumesApi::needHost() const {
  if (!host_)
    return Error(Code::kUnavailable,
                 "volumes are kept by a vesseld running --role=all in this version; this one "
                 "keeps none");
  return okStatus();
}

Status VolumesApi::restore() {
  if (!host_) return okStatus();
  VESSEL_ASSIGN_OR_RETURN(auto records, store_.listNodeVolumes(node_));
  std::set<std::string> known;
  for (const auto& v : records) {
    known.insert(v.id);
    // One volume that will not mount fails its own calls (503), not vesseld.
    if (auto s = host_->restore(v.id, v.read_only); !s.ok())
      log().error("volume {} ({} of tenant {}): {}", v.id, v.name, v.tenant_id,
                  s.error().message());
  }
  for (const auto& id : host_->imageIds()) {
    if (known.count(id)) continue;
    // Kept, not deleted: a store restored from a backup may lack a volume
    // that has data.
    log().warn("volume image {} has no record (a create or delete cut short?): moved to {}", id,
               "orphans/");
    if (auto s = host_->setAside(id); !s.ok()) log().error("{}", s.error().message());
  }
  return okStatus();
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
  r.get("/v1/volumes/{name:volume}",
        sync([this](const Request& q, P p, const std::string& t) { return get(q, t, p["name"]); }));
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
  if (auto s = needHost(); !s.ok()) co_return errorResponse(req, s.error());
  store::VolumeRecord v;
  v.tenant_id = std::move(tenant);
  v.name = std::move(in->name);
  v.size_mib = in->size_mib;
  co_return co_await createImage(req, std::move(v), "");
}

Response VolumesApi::list(const Request& req, const std::string& tenant) {
  auto all = store_.listVolumes(tenant);
  if (!all.ok()) return errorResponse(req, all.error());
  json::array items;
  for (const auto& v : *all) items.push_back(volumeJson(v));
  return jsonResponse(req, http::status::ok,
                      json::serialize(json::object{{"volumes", std::move(items)}}));
}

Response VolumesApi::get(const Request& req, const std::string& tenant, const std::string& name) {
  auto v = store_.getVolume(tenant, name);
  if (!v.ok()) return errorResponse(req, v.error());
  if (!*v) return errorResponse(req, Error(Code::kNotFound, "volume " + name + " does not exist"));
  json::object o = volumeJson(**v);
  // statfs of a mounted filesystem: no disk I/O, fine on the io thread.
  auto use = host_ ? host_->usage((*v)->id) : Result<volumes::FsUsage>(needHost().error());
  o["mounted"] = use.ok();
  if (use.ok()) {
    o["used_bytes"] = use->used_bytes;
    o["free_bytes"] = use->free_bytes;
  }
  return jsonResponse(req, http::status::ok, json::serialize(o));
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
  if (auto s = needHost(); !s.ok()) co_return errorResponse(req, s.error());
  // The record first: once it is gone no new mount can name the volume.
  auto gone = store_.deleteVolume(tenant, name, force);
  if (!gone.ok()) co_return errorResponse(req, gone.error());
  // Forced while sandboxes mount it: their mounts end before the image goes.
  if (mounts_) mounts_->releaseVolume(gone->id);
  auto drop = [host = host_, id = gone->id] { return host->remove(id); };
  Status s = co_await offload(*disk_, std::move(drop));
  // Deleted for the tenant either way; an image left is set aside at the next start.
  if (!s.ok()) log().error("volume {} deleted, its image left: {}", gone->id, s.error().message());
  Response res{http::status::no_content, req.version()};
  res.set(http::field::server, "vessel");
  res.keep_alive(req.keep_alive());
  co_return res;
}

asio::awaitable<Response> VolumesApi::copy(const Request& req, std::string tenant, std::string name,
                                           bool snapshot) {
  auto in = parseVolumeRequest(req.body(), false, limits_.min_mib, limits_.max_mib);
  if (!in.ok()) co_return errorResponse(req, in.error());
  if (auto s = needHost(); !s.ok()) co_return errorResponse(req, s.error());
  auto src = store_.getVolume(tenant, name);
  if (!src.ok()) co_return errorResponse(req, src.error());
  if (!*src)
    co_return errorResponse(req, Error(Code::kNotFound, "volume " + name + " does not exist"));
  store::VolumeRecord v;
  v.tenant_id = tenant;
  v.name = in->name;
  v.size_mib = (*src)->size_mib;
  v.read_only = snapshot;
  v.source_id = (*src)->id;
  co_return co_await createImage(req, std::move(v), (*src)->id);
}

// Admits the record (name, quota), then makes its image on the disk
// worker: empty, or a copy of `from_id`. A failed image takes its record
// back with it.
asio::awaitable<Response> VolumesApi::createImage(const Request& req, store::VolumeRecord v,
                                                  std::string from_id) {
  v.id = newId("vol");
  v.node = node_;
  v.created_ms = store::nowMs();
  if (auto s = store_.insertVolume(v, limits_.tenant_max_mib); !s.ok())
    co_return errorResponse(req, s.error());
  auto make = [host = host_, id = v.id, from = std::move(from_id), mib = v.size_mib,
               ro = v.read_only] {
    return from.empty() ? host->create(id, mib) : host->copy(from, id, ro);
  };
  Status made = co_await offload(*disk_, std::move(make));
  if (!made.ok()) {
    if (auto undo = store_.deleteVolume(v.tenant_id, v.name, true); !undo.ok())
      log().error("volume {}: {}", v.id, undo.error().message());
    co_return errorResponse(req, made.error());
  }
  log().info("volume {} ({} MiB{}) made for tenant {}", v.id, v.size_mib,
             v.read_only ? ", read-only" : "", v.tenant_id);
  co_return jsonResponse(req, http::status::created, json::serialize(volumeJson(v)));
}

}  // namespace vessel::api
