#include "api/volume_mounts.h"

#include <signal.h>

#include <algorithm>
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
    auto back = co_await takeBack(id, agent, a);
    Status s = okStatus();
    if (!back.ok()) {
      s = std::move(back).error();
    } else if (!*back) {
      // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
      auto op = mountOne(id, agent, std::move(a));
      s = co_await std::move(op);
    }
    if (!s.ok()) {
      release(id);
      co_return std::move(s).error().withContext("sandbox " + id + ": mount " + what);
    }
  }
  // Held mounts no attachment named (none in this version) are let go.
  if (auto it = by_sandbox_.find(id); it != by_sandbox_.end())
    std::erase_if(it->second, [](const std::shared_ptr<Mount>& m) {
      if (!m->held) return false;
      end(*m);
      return true;
    });
  co_return okStatus();
}

asio::awaitable<Result<bool>> VolumeMounts::takeBack(
    std::string id, std::shared_ptr<agentclient::AgentClient> agent,
    const ops::VolumeAttachment& a) {
  auto it = by_sandbox_.find(id);
  if (it == by_sandbox_.end()) co_return false;
  auto found = std::find_if(it->second.begin(), it->second.end(),
                            [&](const auto& m) { return m->path == a.path && !m->done; });
  if (found == it->second.end()) co_return false;
  std::shared_ptr<Mount> m = *found;
  bool usable = m->held && !m->relaying && m->server && m->server->process().running() &&
                m->volume_id == a.volume_id && m->read_only == a.read_only;
  if (!usable) {
    // A session of a VM that is gone: a new one replaces it.
    end(*m);
    it->second.erase(found);
    co_return false;
  }
  auto stream = co_await agent->mountVolume(a.path, a.read_only, true);
  if (!stream.ok()) {
    end(*m);
    std::erase(by_sandbox_[id], m);
    co_return std::move(stream).error();
  }
  m->held = false;
  if (!(*stream)->kept()) {
    // The guest could not carry it on (something was outstanding when its
    // host went): a new session, which the old server's state cannot answer.
    VESSEL_CO_ASSIGN_OR_RETURN(std::string root, host_.root(a.volume_id));
    m->server.reset();
    VESSEL_CO_ASSIGN_OR_RETURN(
        m->server, volumes::FileServer::start(o_, root, a.read_only, id + ":" + a.path));
  }
  auto ex = co_await asio::this_coro::executor;
  mountsLog().info("sandbox {}: volume {} at {} {}", id, a.name, a.path,
                   (*stream)->kept() ? "carried on with its session" : "mounted anew");
  startRelay(ex, m, std::move(*stream));
  co_return true;
}

asio::awaitable<Status> VolumeMounts::mountOne(std::string id,
                                               std::shared_ptr<agentclient::AgentClient> agent,
                                               ops::VolumeAttachment a) {
  VESSEL_CO_ASSIGN_OR_RETURN(std::string root, host_.root(a.volume_id));
  auto m = std::make_shared<Mount>();
  m->sandbox = id;
  m->path = a.path;
  m->volume_id = a.volume_id;
  m->read_only = a.read_only;
  VESSEL_CO_ASSIGN_OR_RETURN(m->server,
                             volumes::FileServer::start(o_, root, a.read_only, id + ":" + a.path));
  auto stream = co_await agent->mountVolume(a.path, a.read_only);
  if (!stream.ok()) co_return std::move(stream).error();
  by_sandbox_[id].push_back(m);
  auto ex = co_await asio::this_coro::executor;
  startRelay(ex, m, std::move(*stream));
  mountsLog().info("sandbox {}: volume {} mounted at {} ({}), file server pid {} uid {}", id,
                   a.name, a.path, a.read_only ? "read-only" : "read-write",
                   m->server->process().pid(), m->server->uid());
  co_return okStatus();
}

void VolumeMounts::startRelay(asio::any_io_executor ex, const std::shared_ptr<Mount>& m,
                              std::unique_ptr<agentclient::VolumeStream> stream) {
  std::shared_ptr<agentclient::VolumeStream> s(std::move(stream));
  m->stream = s;
  m->relaying = true;
  asio::co_spawn(ex, serve(m, std::move(s)), asio::detached);
}

asio::awaitable<void> VolumeMounts::serve(std::shared_ptr<Mount> m,
                                          std::shared_ptr<agentclient::VolumeStream> stream) {
  Status s = co_await stream->relay(m->server->socket().get());
  stream->close();
  m->relaying = false;
  if (m->stream != stream) co_return;  // ended by end(); nothing else is this relay's
  m->stream.reset();
  if (m->held && m->server && m->server->process().running()) co_return;  // kept for a resume
  if (!s.ok())
    mountsLog().warn("sandbox {}: volume at {}: {}", m->sandbox, m->path, s.error().message());
  // Unmounted in the guest (if it is still there), then the server stops.
  m->server.reset();
  m->done = true;
}

asio::awaitable<void> VolumeMounts::quiesce(std::string id,
                                            std::shared_ptr<agentclient::AgentClient> agent,
                                            bool hold) {
  auto it = by_sandbox_.find(id);
  if (it == by_sandbox_.end() || it->second.empty() || !agent) co_return;
  Status s = co_await agent->quiesceVolumes(false);
  if (!s.ok()) {
    mountsLog().warn("sandbox {}: volumes not quieted ({}): they are mounted anew at its resume",
                     id, s.error().message());
    co_return;
  }
  if (hold)
    for (auto& m : by_sandbox_[id]) m->held = true;
}

asio::awaitable<void> VolumeMounts::unquiesce(std::string id,
                                              std::shared_ptr<agentclient::AgentClient> agent) {
  auto it = by_sandbox_.find(id);
  if (it == by_sandbox_.end() || it->second.empty()) co_return;
  for (auto& m : it->second) m->held = false;
  if (!agent) co_return;
  Status s = co_await agent->quiesceVolumes(true);
  if (!s.ok()) mountsLog().warn("sandbox {}: volumes: {}", id, s.error().message());
}

void VolumeMounts::end(Mount& m) {
  m.held = false;
  if (m.stream) m.stream->close();
  m.stream.reset();
  m.done = !m.relaying;
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
