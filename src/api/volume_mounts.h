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
  asio::awaitable<void> quiesce(std::string id, std::shared_ptr<agentclient::AgentClient> agent,
                                bool hold) override;
  asio::awaitable<void> unquiesce(std::string id,
                                  std::shared_ptr<agentclient::AgentClient> agent) override;
  void release(const std::string& id) override;
  // Volume `volume_id` is being deleted (forced, while mounted): every
  // mount of it ends now (the guests' calls on it fail with ENOTCONN).
  void releaseVolume(const std::string& volume_id);
  // Mounts being served now (tests, metrics).
  size_t active() const;

 private:
  struct Mount {
    std::string sandbox, path, volume_id;
    bool read_only = false;
    std::unique_ptr<volumes::FileServer> server;
    std::shared_ptr<agentclient::VolumeStream> stream;  // the relay's, while it runs
    bool relaying = false;
    // quiesce(hold): the server outlives the relay, for the session to
    // carry on over the resumed VM's agent.
    bool held = false;
    bool done = false;  // the relay ended and the server with it
  };
  asio::awaitable<Status> mountOne(std::string id, std::shared_ptr<agentclient::AgentClient> agent,
                                   ops::VolumeAttachment a);
  // The held mount of `id` at a.path taken back by its guest, or the
  // server replaced when the guest began a new session; nullptr (and the
  // held one let go) when there is none to take back.
  asio::awaitable<Result<bool>> takeBack(std::string id,
                                         std::shared_ptr<agentclient::AgentClient> agent,
                                         const ops::VolumeAttachment& a);
  static void startRelay(asio::any_io_executor ex, const std::shared_ptr<Mount>& m,
                         std::unique_ptr<agentclient::VolumeStream> stream);
  static asio::awaitable<void> serve(std::shared_ptr<Mount> m,
                                     std::shared_ptr<agentclient::VolumeStream> stream);
  // Unmounts in the guest and stops the server; serve() reaps it.
  static void end(Mount& m);

  volumes::VolumeHost& host_;
  volumes::FileServerOptions o_;
  std::map<std::string, std::vector<std::shared_ptr<Mount>>> by_sandbox_;
};

}  // namespace vessel::api
