#pragma once
// Volumes mounted in sandboxes on this machine (ops::VolumeMounter;
// docs/design.md, "Volumes"): for each mount a confined file server
// (volumes::FileServer) on the volume's directory, and a relay between its
// socket and the sandbox's agent (agentclient::VolumeStream::relay). Lives
// on the io thread, as the lifecycle that calls it.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agentclient/agent_client.h"
#include "ops/volume_mounter.h"
#include "volumes/file_server.h"
#include "volumes/volume_host.h"

namespace vessel::api {

namespace asio = boost::asio;

class VolumeMounts : public ops::VolumeMounter {
 public:
  VolumeMounts(volumes::VolumeHost& host, volumes::FileServerOptions o)
      : host_(host), o_(std::move(o)) {}
  ~VolumeMounts() override;

  asio::awaitable<Status> mount(std::string id, std::shared_ptr<agentclient::AgentClient> agent,
                                std::vector<ops::VolumeAttachment> v) override;
  void release(const std::string& id) override;
  // Volume `volume_id` is being deleted (forced, while mounted): every
  // mount of it ends now (the guests' calls on it fail with ENOTCONN).
  void releaseVolume(const std::string& volume_id);
  // Mounts being served now (tests, metrics).
  size_t active() const;

 private:
  struct Mount {
    std::string sandbox, path, volume_id;
    std::unique_ptr<volumes::FileServer> server;
    std::unique_ptr<agentclient::VolumeStream> stream;
    bool done = false;  // the relay ended
  };
  asio::awaitable<Status> mountOne(std::string id, std::shared_ptr<agentclient::AgentClient> agent,
                                   ops::VolumeAttachment a);
  static asio::awaitable<void> serve(std::shared_ptr<Mount> m);
  // Unmounts in the guest and stops the server; serve() reaps it.
  static void end(Mount& m);

  volumes::VolumeHost& host_;
  volumes::FileServerOptions o_;
  std::map<std::string, std::vector<std::shared_ptr<Mount>>> by_sandbox_;
};

}  // namespace vessel::api
