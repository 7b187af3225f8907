#pragma once
// Volumes through the API (docs/volumes.md, api/openapi.yaml): create,
// list, get (with the bytes used), delete (refused while a sandbox mounts
// the volume, unless ?force=true), clone and snapshot; and a volume's files
// without a sandbox (list or stat, streamed read, streamed atomic write,
// mkdir, remove). The store holds what exists (names, tenants, the quota);
// this machine's volumes::VolumeHost holds the images and mounts. Disk work
// (mkfs, copies) runs on a worker thread of its own, file calls on
// another pool: never on the io thread.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <memory>
#include <optional>
#include <string>

#include "api/http_names.h"
#include "api/network_api.h"
#include "api/volume_mounts.h"
#include "api/volume_requests.h"
#include "http/server.h"
#include "store/store.h"
#include "volumes/files.h"
#include "volumes/volume_host.h"

namespace vessel::api {

struct VolumeLimits {
  int64_t tenant_max_mib = 200 * 1024;  // every volume of a tenant together
  uint64_t max_mib = 64 * 1024;         // one volume
  uint64_t min_mib = 16;                // what ext4 with its journal needs
};

class VolumesApi {
 public:
  // `host`: this machine's volumes; null where none are kept (an API
  // replica in this version), and every route answers 503 saying so.
  VolumesApi(store::Store& store, volumes::VolumeHost* host, VolumeLimits limits,
             std::string node = "");
  ~VolumesApi();

  // Mounts every volume the store places on this node, adopting mounts a
  // killed vesseld left, and sets aside (VolumeHost::setAside) images the
  // store does not name. Before serving.
  Status restore();
  // The mounts in sandboxes (null: none here): a forced delete ends them.
  void setMounts(VolumeMounts* m) { mounts_ = m; }
  // The routes under /v1/volumes, each behind `authed`.
  void install(Router& r, const Authenticated& authed);

 private:
  asio::awaitable<Response> create(const Request& req, std::string tenant);
  Response list(const Request& req, const std::string& tenant);
  Response get(const Request& req, const std::string& tenant, const std::string& name);
  asio::awaitable<Response> remove(const Request& req, std::string tenant, std::string name);
  asio::awaitable<Response> copy(const Request& req, std::string tenant, std::string name,
                                 bool snapshot);
  asio::awaitable<Response> createImage(const Request& req, store::VolumeRecord v,
                                        std::string from_id);
  // volumes_files_api.cc
  void installFiles(Router& r, const Authenticated& authed);
  // The tenant's volume's files, or the refusal (404, 503).
  Result<std::pair<store::VolumeRecord, volumes::VolumeFiles>> filesOf(const std::string& tenant,
                                                                       const std::string& name);
  asio::awaitable<Response> listFiles(const Request& req, std::string tenant, std::string name);
  asio::awaitable<std::optional<Response>> readFile(const Request& req,
                                                    boost::beast::tcp_stream& stream,
                                                    std::string tenant, std::string name);
  asio::awaitable<Response> writeFile(const Request& req, http::BodyReader& body, std::string name);
  asio::awaitable<Response> mkdir(const Request& req, std::string tenant, std::string name);
  asio::awaitable<Response> removeFile(const Request& req, std::string tenant, std::string name);
  Status needHost() const;

  store::Store& store_;
  volumes::VolumeHost* host_;
  VolumeMounts* mounts_ = nullptr;
  VolumeLimits limits_;
  std::string node_;
  std::unique_ptr<asio::thread_pool> disk_;   // mkfs, copies, unmounts: one at a time
  std::unique_ptr<asio::thread_pool> files_;  // file calls
};

}  // namespace vessel::api
