#pragma once
// Volumes through the API (docs/volumes.md, api/openapi.yaml): create,
// list, get (with the bytes used), delete (refused while a sandbox mounts
// the volume, unless ?force=true), clone and snapshot; and a volume's files
// without a sandbox (list or stat, streamed read, streamed atomic write,
// mkdir, remove). The store holds what exists (names, tenants, the quota,
// the node each volume is on); the ops::VolumeKeeper holds the images and
// their files: this machine's (api/local_volumes.h), or on an API replica
// the nodes' through the node API (cluster/cluster_volumes.h).
#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <memory>
#include <optional>
#include <string>

#include "api/http_names.h"
#include "api/network_api.h"
#include "api/volume_requests.h"
#include "http/server.h"
#include "ops/volume_keeper.h"
#include "store/store.h"

namespace vessel::api {

struct VolumeLimits {
  int64_t tenant_max_mib = 200 * 1024;  // every volume of a tenant together
  uint64_t max_mib = 64 * 1024;         // one volume
  uint64_t min_mib = 16;                // what ext4 with its journal needs
};

class VolumesApi {
 public:
  VolumesApi(store::Store& store, ops::VolumeKeeper& keeper, VolumeLimits limits)
      : store_(store), keeper_(keeper), limits_(limits) {}

  // The routes under /v1/volumes, each behind `authed`.
  void install(Router& r, const Authenticated& authed);

  // What the routes do, for another front end (E2B's Volume API, wired by
  // vesseld): a create (placed, name and quota admitted, its image made)
  // and a delete (kFailedPrecondition while mounted, unless `force`).
  asio::awaitable<Result<store::VolumeRecord>> createVolume(std::string tenant, std::string name,
                                                            uint64_t size_mib);
  asio::awaitable<Status> deleteVolume(std::string tenant, std::string name, bool force);
  const VolumeLimits& limits() const { return limits_; }

 private:
  asio::awaitable<Response> create(const Request& req, std::string tenant);
  Response list(const Request& req, const std::string& tenant);
  asio::awaitable<Response> get(const Request& req, std::string tenant, std::string name);
  asio::awaitable<Response> remove(const Request& req, std::string tenant, std::string name);
  asio::awaitable<Response> copy(const Request& req, std::string tenant, std::string name,
                                 bool snapshot);
  asio::awaitable<Response> createImage(const Request& req, store::VolumeRecord v,
                                        std::optional<store::VolumeRecord> from);
  asio::awaitable<Result<store::VolumeRecord>> makeVolume(store::VolumeRecord v,
                                                          std::optional<store::VolumeRecord> from);
  // The tenant's volume `name`, or kNotFound.
  Result<store::VolumeRecord> find(const std::string& tenant, const std::string& name);
  // volumes_files_api.cc
  void installFiles(Router& r, const Authenticated& authed);
  asio::awaitable<Response> listFiles(const Request& req, std::string tenant, std::string name);
  asio::awaitable<std::optional<Response>> readFile(const Request& req,
                                                    boost::beast::tcp_stream& stream,
                                                    std::string tenant, std::string name);
  asio::awaitable<Response> writeFile(const Request& req, http::BodyReader& body, std::string name);
  asio::awaitable<Response> mkdir(const Request& req, std::string tenant, std::string name);
  asio::awaitable<Response> removeFile(const Request& req, std::string tenant, std::string name);

  store::Store& store_;
  ops::VolumeKeeper& keeper_;
  VolumeLimits limits_;
};

}  // namespace vessel::api
