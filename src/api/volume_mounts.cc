#include "api/volume_mounts.h"

#include <signal.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>

#include "base/log.h"

namespace vessel::api {

namespace {

Logger mountsLog() { return Logger("volumes"); }

}  // namespace

VolumeMounts::~VolumeMounts() {
  for (auto& [id, mounts] : by_sandbox_)
    for (auto& m : mounts)
      if (m->stream) m->stream->close();
}

asio::awaitable<Status> VolumeMounts::mount(std::string id,
                                            std::shared_ptr<agentclient::AgentClient> agent,
                                            std::vector<ops::VolumeAttachment> v) {
  if (!agent) co_return Error(Code::kUnavailable, "sandbox " + id + ": no agent to mount volumes");
  for (auto& a : v) {
    std::string what = "volume '" + a.name + "' at " + a.path;
    // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
    auto op = mountOne(id, agent, std::move(a));
    Status s = co_await std::move(op);
    if (!s.ok()) {
      release(id);
      co_return std::move(s).error().withContext("sandbox " + id + ": mount " + what);
    }
  }
  co_return okStatus();
}

asio::awaitable<Status> VolumeMounts::mountOne(std::string id,
                                               std::shared_ptr<agentclient::AgentClient> agent,
                                               ops::VolumeAttachment a) {
  VESSEL_CO_ASSIGN_OR_RETURN(std::string root, host_.root(a.volume_id));
  auto m = std::make_shared<Mount>();
  m->sandbox = id;
  m->path = a.path;
  m->volume_id = a.volume_id;
  VESSEL_CO_ASSIGN_OR_RETURN(m->server,
                             volumes::FileServer::start(o_, root, a.read_only, id + ":" + a.path));
  auto stream = co_await agent->mountVolume(a.path, a.read_only);
  if (!stream.ok()) co_return std::move(stream).error();
  m->stream = std::move(*stream);
  by_sandbox_[id].push_back(m);
  auto ex = co_await asio::this_coro::executor;
  asio::co_spawn(ex, serve(m), asio::detached);
  mountsLog().info("sandbox {}: volume {} mounted at {} ({}), file server pid {} uid {}", id,
                   a.name, a.path, a.read_only ? "read-only" : "read-write",
                   m->server->process().pid(), m->server->uid());
  co_return okStatus();
}

asio::awaitable<void> VolumeMounts::serve(std::shared_ptr<Mount> m) {
  Status s = co_await m->stream->relay(m->server->socket().get());
  if (!s.ok())
    mountsLog().warn("sandbox {}: volume at {}: {}", m->sandbox, m->path, s.error().message());
  // Unmounted in the guest (if it is still there), then the server stops.
  m->stream->close();
  m->server.reset();
  m->done = true;
}

void VolumeMounts::end(Mount& m) {
  m.stream->close();
  // Its socket closes with it, which ends the relay; serve() reaps it.
  if (m.server && m.server->process().running()) (void)m.server->process().signal(SIGKILL);
}

void VolumeMounts::release(const std::string& id) {
  auto it = by_sandbox_.find(id);
  if (it == by_sandbox_.end()) return;
  for (auto& m : it->second) end(*m);
  by_sandbox_.erase(it);
}

void VolumeMounts::releaseVolume(const std::string& volume_id) {
  for (auto& [id, mounts] : by_sandbox_)
    std::erase_if(mounts, [&](const std::shared_ptr<Mount>& m) {
      if (m->volume_id != volume_id) return false;
      end(*m);
      return true;
    });
}

size_t VolumeMounts::active() const {
  size_t n = 0;
  for (const auto& [id, mounts] : by_sandbox_)
    for (const auto& m : mounts) n += !m->done;
  return n;
}

}  // namespace vessel::api
