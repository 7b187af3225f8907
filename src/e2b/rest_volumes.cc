// E2B's Volume API, the volumes themselves: POST/GET /volumes, GET/DELETE
// /volumes/{volumeID}, behind the tenant's key like every other REST
// route, onto the tenant's Vessel volumes (e2b/volumes.h). Each answer
// that names a volume carries its token (access_token.h), which alone
// authorizes /volumecontent for that volume (rest_volume_files.cc).
#include <boost/json.hpp>

#include "e2b/rest.h"

namespace vessel::e2b {

namespace json = boost::json;

namespace {

Error noVolumes() {
  return Error(Code::kUnavailable,
               "volumes are kept by a vesseld running --role=all in this version; this one keeps "
               "none");
}

}  // namespace

void RestApi::installVolumes(http::Router& r) {
  r.paramType("volume", [](std::string_view id) -> Status {
    if (!volumeIdShape(id))
      return Error(Code::kNotFound, "volume " + std::string(id) + " not found");
    return okStatus();
  });
  using P = const http::Params&;
  auto authed = [this](std::function<asio::awaitable<Response>(const Request&, std::string, P)> h)
      -> http::RouteHandler {
    return [this, h = std::move(h)](const Request& q, P p) -> asio::awaitable<Response> {
      auto tenant = tenantOf(q);
      if (!tenant.ok()) co_return errorJson(q, tenant.error());
      co_return co_await h(q, std::move(*tenant), p);
    };
  };
  r.post("/volumes", authed([this](const Request& q, std::string t, P) {
           return createVolume(q, std::move(t));
         }));
  r.get("/volumes", authed([this](const Request& q, std::string t, P) -> asio::awaitable<Response> {
          co_return listVolumes(q, t);
        }));
  r.get("/volumes/{volumeID:volume}",
        authed([this](const Request& q, std::string t, P p) -> asio::awaitable<Response> {
          co_return getVolume(q, t, p["volumeID"]);
        }));
  r.del("/volumes/{volumeID:volume}", authed([this](const Request& q, std::string t, P p) {
          return deleteVolume(q, std::move(t), p["volumeID"]);
        }));
  installVolumeFiles(r);
}

Result<store::VolumeRecord> RestApi::volumeById(const std::string& tenant, const std::string& id) {
  if (!volumes_.list) return noVolumes();
  VESSEL_ASSIGN_OR_RETURN(auto all, volumes_.list(tenant));
  for (auto& v : all)
    if (v.id == id) return std::move(v);
  return Error(Code::kNotFound, "volume " + id + " not found");
}

asio::awaitable<Response> RestApi::createVolume(const Request& req, std::string tenant) {
  auto name = parseNewVolume(req.body());
  if (!name.ok()) co_return errorJson(req, name.error());
  if (!volumes_.create) co_return errorJson(req, noVolumes());
  auto made = co_await volumes_.create(tenant, std::move(*name));
  if (!made.ok()) co_return errorJson(req, made.error());
  co_return jsonBody(req, http::status::created,
                     json::object{{"volumeID", made->id},
                                  {"name", made->name},
                                  {"token", tokens_.forVolume(tenant, made->id)}});
}

Response RestApi::listVolumes(const Request& req, const std::string& tenant) {
  if (!volumes_.list) return errorJson(req, noVolumes());
  auto all = volumes_.list(tenant);
  if (!all.ok()) return errorJson(req, all.error());
  json::array items;
  for (const auto& v : *all) items.push_back(json::object{{"volumeID", v.id}, {"name", v.name}});
  return jsonBody(req, http::status::ok, items);
}

Response RestApi::getVolume(const Request& req, const std::string& tenant, const std::string& id) {
  auto v = volumeById(tenant, id);
  if (!v.ok()) return errorJson(req, v.error());
  return jsonBody(
      req, http::status::ok,
      json::object{
          {"volumeID", v->id}, {"name", v->name}, {"token", tokens_.forVolume(tenant, v->id)}});
}

asio::awaitable<Response> RestApi::deleteVolume(const Request& req, std::string tenant,
                                                std::string id) {
  auto v = volumeById(tenant, id);
  if (!v.ok()) co_return errorJson(req, v.error());
  // Refused (409) while a sandbox mounts it, as Vessel's own delete without force.
  Status s = co_await volumes_.remove(tenant, v->name);
  if (!s.ok()) co_return errorJson(req, s.error());
  co_return noContent(req);
}

std::map<std::string, std::vector<VolumeMount>> RestApi::mountsOf(const std::string& tenant) {
  if (!volumes_.mounts) return {};
  auto m = volumes_.mounts(tenant);
  // A sandbox object without its mounts rather than no object.
  if (!m.ok()) return {};
  return std::move(*m);
}

}  // namespace vessel::e2b
