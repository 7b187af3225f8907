#include "vesseld/local_node.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstring>

#include "base/fd.h"
#include "base/log.h"
#include "os/proc_usage.h"

namespace vessel::vesseld {

namespace {
Logger nodeLog(const std::string& id) { return Logger("node", id); }
}  // namespace

LocalNode::~LocalNode() { alive_.reset(); }

Status LocalNode::prepareNetwork(const std::string& tenant, const std::string& id,
                                 const std::optional<ops::NetworkSpec>& spec) {
  if (!network_) {
    if (spec && !spec->mode.empty() && spec->mode != "none")
      return Error(Code::kFailedPrecondition, "this node has no egress: only network mode none");
    pending_net_[id] = node::GuestNetwork{};
    return okStatus();
  }
  VESSEL_ASSIGN_OR_RETURN(auto g,
                          network_->prepare(tenant, id, spec.value_or(network_->defaults())));
  pending_net_[id] = std::move(g);
  return okStatus();
}

Status LocalNode::inheritNetwork(const std::string& parent, const std::string& child) {
  return network_ ? network_->inherit(parent, child) : okStatus();
}

asio::awaitable<Result<ops::NetworkSpec>> LocalNode::updateNetwork(std::string tenant,
                                                                   std::string id,
                                                                   ops::NetworkSpec spec) {
  if (!network_) {
    if (spec.mode == "none") co_return spec;
    co_return Error(Code::kFailedPrecondition,
                    "this node runs without egress: only network mode none");
  }
  bool paused = holding(id) == ops::Holding::kPaused;
  co_return co_await network_->update(tenant, id, std::move(spec), paused);
}

Result<ops::NetworkSpec> LocalNode::network(const std::string& id) {
  if (!network_) {
    ops::NetworkSpec none;
    none.mode = "none";
    return none;
  }
  return network_->stored(id);
}

asio::awaitable<void> LocalNode::credentialChanged(std::string tenant, std::string name) {
  if (network_) co_await network_->credentialChanged(tenant, name);
}

asio::awaitable<Status> LocalNode::takeUp(const std::string& tenant,
                                          std::shared_ptr<node::Sandbox> sb) {
  if (network_) {
    // No gateway registration, no sandbox: it must not run with a network
    // other than the one asked for.
    if (auto a = co_await network_->attach(tenant, sb); !a.ok()) {
      (void)co_await runtime_.destroy(*sb);
      co_return std::move(a).error();
    }
  }
  std::string id = sb->id();
  consoleRestart(id);
  held_[id] = Held{tenant, std::move(sb), 0};
  watch(id);
  co_return okStatus();
}

asio::awaitable<Status> LocalNode::create(ops::NodeCreate c) {
  BusyMark busy(*this, c.id);
  node::CreateOptions opts;
  opts.id = c.id;
  opts.env = std::move(c.env);
  opts.cold = c.cold;
  opts.disk_mib = c.disk_mib;
  if (auto it = pending_net_.find(c.id); it != pending_net_.end()) {
    opts.network = std::move(it->second);
    pending_net_.erase(it);
  }
  auto sb = co_await runtime_.create(c.template_name, std::move(opts));
  if (!sb.ok()) co_return std::move(sb).error();
  co_return co_await takeUp(c.tenant, std::move(*sb));
}

asio::awaitable<Status> LocalNode::pause(std::string id, bool keep_memory) {
  BusyMark busy(*this, id);
  auto it = held_.find(id);
  if (it == held_.end() || it->second.sb->state() != node::Sandbox::State::kRunning)
    co_return Error(Code::kUnavailable, "sandbox " + id + " has no VM on this node");
  Held h = it->second;
  it->second.watch = 0;  // its VM stops on purpose
  consoleDone(id, *h.sb);
  // The gateway forgets the slot before it is released.
  if (network_) co_await network_->detach(id);
  auto s = co_await runtime_.pause(*h.sb, keep_memory);
  if (!s.ok() && h.sb->state() == node::Sandbox::State::kRunning) {
    if (network_)
      if (auto a = co_await network_->attach(h.tenant, h.sb); !a.ok())
        nodeLog(id).error("re-attach after failed pause: {}", a.error().message());
    if (held_.count(id)) watch(id);
  }
  co_return s;
}

asio::awaitable<Status> LocalNode::resume(std::string tenant, std::string id) {
  BusyMark busy(*this, id);
  auto r = co_await runtime_.resume(id);
  if (!r.ok()) co_return std::move(r).error();
  if (network_) {
    if (auto a = co_await network_->attach(tenant, *r); !a.ok()) {
      (void)co_await runtime_.pause(**r);
      co_return std::move(a).error();
    }
  }
  consoleRestart(id);
  held_[id] = Held{tenant, std::move(*r), 0};
  watch(id);
  co_return okStatus();
}

asio::awaitable<Result<std::vector<Status>>> LocalNode::fork(std::string tenant, std::string id,
                                                             std::vector<std::string> copies) {
  BusyMark busy(*this, id);
  std::vector<std::unique_ptr<BusyMark>> copies_busy;
  for (const auto& c : copies) copies_busy.push_back(std::make_unique<BusyMark>(*this, c));
  auto it = held_.find(id);
  if (it == held_.end() || it->second.sb->state() != node::Sandbox::State::kRunning)
    co_return Error(Code::kUnavailable, "sandbox " + id + " has no VM on this node");
  std::shared_ptr<node::Sandbox> src = it->second.sb;  // kept alive across the await
  auto r = co_await runtime_.forkAs(*src, copies);
  if (!r.ok()) co_return std::move(r).error();
  std::vector<Status> out;
  // Each copy's egress policy (inherited at the request), as at create: no
  // copy runs with a network it was not given.
  for (auto& c : *r) out.push_back(co_await takeUp(tenant, c));
  co_return out;
}

asio::awaitable<Result<templates::Manifest>> LocalNode::forkToTemplate(std::string id,
                                                                       std::string stored_name) {
  auto it = held_.find(id);
  if (it == held_.end() || it->second.sb->state() != node::Sandbox::State::kRunning)
    co_return Error(Code::kUnavailable, "sandbox " + id + " has no VM on this node");
  std::shared_ptr<node::Sandbox> src = it->second.sb;
  auto t = co_await runtime_.forkToTemplate(*src, stored_name);
  if (!t.ok()) co_return std::move(t).error();
  co_return (*t)->manifest;
}

void LocalNode::enableTemplateBuilds(node::TemplateBuildEnv env) {
  builder_ = std::make_unique<node::TemplateWorker>(std::move(env));
}

Status LocalNode::build(ops::BuildRequest req, ops::BuildCallbacks cb) {
  if (!builder_) return Error(Code::kUnavailable, "template builds are not enabled on this node");
  node::TemplateWorker::Job job;
  job.spec = std::move(req.spec);
  job.base = std::move(req.base);
  job.registry_auth = std::move(req.registry_auth);
  // The worker calls back on its thread: each call goes to the io thread,
  // and none once this node is gone.
  std::weak_ptr<bool> alive = alive_;
  job.progress = [this, alive, progress = std::move(cb.progress)](const std::string& step,
                                                                  int percent) {
    asio::post(io_, [alive, progress, step, percent] {
      if (!alive.expired() && progress) progress(step, percent);
    });
  };
  if (cb.log)
    job.log = [this, alive, log = std::move(cb.log)](const templates::BuildLogEntry& e) {
      asio::post(io_, [alive, log, e] {
        if (!alive.expired()) log(e);
      });
    };
  // Posted before done: the io thread's store knows the new template's
  // files as checked before anyone hears of it, and does not hash them again.
  job.hashed = [this, alive](std::map<std::string, templates::TemplateStore::HashedFile> h) {
    asio::post(io_, [this, alive, h = std::move(h)] {
      if (!alive.expired()) runtime_.templates().noteHashed(h);
    });
  };
  job.done = [this, alive, done = std::move(cb.done)](Result<templates::Manifest> r) {
    asio::post(io_, [alive, done, r = std::move(r)]() mutable {
      if (!alive.expired() && done) done(std::move(r));
    });
  };
  return builder_->submit(std::move(job));
}

asio::awaitable<Status> LocalNode::destroy(std::string id) {
  BusyMark busy(*this, id);
  pending_net_.erase(id);
  auto it = held_.find(id);
  if (it == held_.end()) co_return runtime_.discardFiles(id);
  Held h = std::move(it->second);
  held_.erase(it);
  if (h.sb->state() == node::Sandbox::State::kRunning) consoleDone(id, *h.sb);
  if (start_) start_->forget(id);
  if (network_) co_await network_->detach(id);
  // A paused sandbox is not restored to be destroyed: its files go.
  co_return co_await runtime_.destroy(*h.sb);
}

ops::Holding LocalNode::holding(const std::string& id) const {
  auto it = held_.find(id);
  if (it == held_.end()) return ops::Holding::kNothing;
  return it->second.sb->state() == node::Sandbox::State::kRunning ? ops::Holding::kRunning
                                                                  : ops::Holding::kPaused;
}

namespace {

// A qcow2 image's virtual size (header: magic "QFI\xfb", size at offset 24,
// big endian); a raw image's file size.
uint64_t diskVirtualSize(const std::string& path, const struct stat& st) {
  unsigned char h[32];
  auto fd = Fd::open(path, O_RDONLY);
  if (!fd.ok() || ::pread(fd->get(), h, sizeof h, 0) != static_cast<ssize_t>(sizeof h))
    return static_cast<uint64_t>(st.st_size);
  if (h[0] != 'Q' || h[1] != 'F' || h[2] != 'I' || h[3] != 0xfb)
    return static_cast<uint64_t>(st.st_size);
  uint64_t v = 0;
  for (int i = 24; i < 32; ++i) v = v << 8 | h[i];
  return v;
}

}  // namespace

asio::awaitable<Result<ops::Usage>> LocalNode::usage(std::string id) { co_return measure(id); }

Result<ops::Usage> LocalNode::measure(const std::string& id) {
  auto it = held_.find(id);
  if (it == held_.end() || it->second.sb->state() != node::Sandbox::State::kRunning ||
      !it->second.sb->vm())
    return Error(Code::kFailedPrecondition, "sandbox " + id + " has no VM on this node");
  const auto& sb = *it->second.sb;
  pid_t pid = sb.vm()->pid();
  VESSEL_ASSIGN_OR_RETURN(os::ProcUsage p, os::procUsage(pid));
  auto now = std::chrono::steady_clock::now();
  double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  ops::Usage u;
  u.mem_used_bytes = p.rss_bytes;
  // CPU since the previous sample of this VM, else since it started.
  auto& prev = cpu_samples_[id];
  double busy_s = 0, wall_s = 0;
  if (prev.pid == pid && p.cpu_ticks >= prev.ticks && now > prev.at) {
    busy_s = static_cast<double>(p.cpu_ticks - prev.ticks) / hz;
    wall_s = std::chrono::duration<double>(now - prev.at).count();
  } else if (auto up = os::uptimeTicks(); up.ok() && *up > p.start_ticks) {
    busy_s = static_cast<double>(p.cpu_ticks) / hz;
    wall_s = static_cast<double>(*up - p.start_ticks) / hz;
  }
  if (wall_s > 0) u.cpu_used_pct = 100.0 * busy_s / wall_s;
  prev = {pid, p.cpu_ticks, now};
  std::string disk = sb.vmDir() + "/disk.qcow2";
  struct stat st {};
  if (::stat(disk.c_str(), &st) == 0) {
    u.disk_used_bytes = static_cast<uint64_t>(st.st_blocks) * 512;
    u.disk_total_bytes = diskVirtualSize(disk, st);
  }
  return u;
}

std::shared_ptr<agentclient::AgentClient> LocalNode::agent(const std::string& id) {
  auto it = held_.find(id);
  if (it == held_.end() || it->second.sb->state() != node::Sandbox::State::kRunning) return nullptr;
  auto a = it->second.sb->agent();
  // Set on first use: a pooled VM's client is its sandbox's from its claim
  // on, and a resume or fork brings a client of its own.
  if (a && command_log_ && !a->commandObserver()) a->setCommandObserver(command_log_(id));
  return a;
}

std::shared_ptr<node::Sandbox> LocalNode::sandbox(const std::string& id) const {
  auto it = held_.find(id);
  return it == held_.end() ? nullptr : it->second.sb;
}

asio::awaitable<Result<ops::Holding>> LocalNode::adopt(std::string tenant, std::string id) {
  BusyMark busy(*this, id);
  auto sb = co_await runtime_.adopt(id);
  if (!sb.ok()) co_return std::move(sb).error();
  if ((*sb)->state() != node::Sandbox::State::kRunning) {
    held_[id] = Held{tenant, std::move(*sb), 0};
    co_return ops::Holding::kPaused;
  }
  // The restarted gateway knows nothing of it: its policy goes back before
  // anything else can happen, or the VM goes.
  std::string console = (*sb)->vmDir() + "/console.log";
  if (auto s = co_await takeUp(tenant, std::move(*sb)); !s.ok())
    co_return Error(s.error().code(),
                    "its network policy could not be registered again: " + s.error().message());
  // What its console said before the restart is in its log already.
  if (console_) console_->skipTo(id, console);
  co_return ops::Holding::kRunning;
}

asio::awaitable<int> LocalNode::discardOrphans(std::set<std::string> keep) {
  co_return co_await runtime_.discardOrphans(std::move(keep));
}

asio::awaitable<std::vector<std::string>> LocalNode::shutdown(bool stop_vms) {
  // Builds first: the running one unwinds (its VM stops), queued ones are
  // dropped; the lifecycle fails their operations.
  builder_.reset();
  std::vector<std::string> stopped;
  auto held = std::move(held_);
  held_.clear();
  for (auto& [id, h] : held) {
    if (h.sb->state() != node::Sandbox::State::kRunning) continue;
    if (!stop_vms) {
      // Let go of the channels only; QEMU runs on (own session, no death
      // signal) with its network slot, and the next vesseld adopts both.
      runtime_.release(*h.sb);
      continue;
    }
    if (network_) co_await network_->detach(id);
    (void)co_await runtime_.destroy(*h.sb);
    stopped.push_back(id);
  }
  co_await runtime_.drainPools();
  co_return stopped;
}

void LocalNode::watch(const std::string& id) {
  auto it = held_.find(id);
  if (it == held_.end() || !it->second.sb->vm() || !it->second.sb->agent()) return;
  uint64_t gen = next_watch_++;
  it->second.watch = gen;
  asio::co_spawn(io_, watchLoop(id, gen), asio::detached);
  if (uint32_t pid = it->second.sb->startPid(); pid && start_)
    asio::co_spawn(io_, startLoop(id, gen, pid), asio::detached);
}

asio::awaitable<void> LocalNode::startLoop(std::string id, uint64_t gen, uint32_t pid) {
  auto alive = std::weak_ptr<bool>(alive_);
  auto held = held_.find(id);
  if (held == held_.end() || held->second.watch != gen || !held->second.sb->agent()) co_return;
  std::shared_ptr<node::Sandbox> sb = held->second.sb;
  std::shared_ptr<agentclient::AgentClient> agent = sb->agent();
  // Still the VM this follower was started for (not paused, deleted,
  // lost, or watched anew after a failed pause).
  auto current = [&] {
    if (alive.expired()) return false;
    auto it = held_.find(id);
    return it != held_.end() && it->second.watch == gen && it->second.sb == sb;
  };
  // Not found: it exited and a client read its exit, or this memory
  // never had it; either way nothing is left to log.
  auto p = co_await agent->attach(pid);
  if (!p.ok() || !current()) co_return;
  start_->lost(id, pid, (*p)->lostBytes());
  for (;;) {
    auto ev = co_await (*p)->next();
    // An error: the channel closed (a pause, a stop) or another client
    // attached; a later VM of this sandbox attaches again.
    if (!ev.ok() || !current()) co_return;
    if (ev->kind == agentclient::ProcessEvent::Kind::kExit) {
      start_->exited(id, pid, ev->exit);
      co_return;
    }
    bool is_err = ev->kind == agentclient::ProcessEvent::Kind::kStderr;
    if (!start_->output(id, pid, is_err, ev->data)) {
      (*p)->detach();  // the bound: the agent keeps the newest output
      co_return;
    }
  }
}

asio::awaitable<void> LocalNode::watchLoop(std::string id, uint64_t gen) {
  using namespace asio::experimental::awaitable_operators;
  auto alive = std::weak_ptr<bool>(alive_);
  std::shared_ptr<node::Sandbox> sb = held_.at(id).sb;
  std::shared_ptr<agentclient::AgentClient> agent = sb->agent();
  // Our own pidfd: it outlives the Vm object if the sandbox is destroyed
  // meanwhile, and an adopted QEMU (not our child) is watched the same way.
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, sb->vm()->pid(), 0));
  if (fd < 0) {
    nodeLog(id).warn("cannot watch its VM: pidfd_open: {}", std::strerror(errno));
    co_return;
  }
  asio::posix::stream_descriptor pidfd(io_, fd);
  auto exited = pidfd.async_wait(asio::posix::stream_descriptor::wait_read,
                                 asio::as_tuple(asio::use_awaitable));
  auto closed = agent->waitClosed();
  auto which = co_await (std::move(exited) || std::move(closed));
  if (alive.expired()) co_return;
  auto it = held_.find(id);
  // Stopped, paused, released or replaced on purpose: not ours to report.
  if (it == held_.end() || it->second.watch != gen || it->second.sb != sb) co_return;
  if (which.index() == 1) {
    // A VM that dies closes its channel first: give its exit a moment to
    // show, so the reason names what happened rather than its symptom.
    asio::steady_timer grace(io_, std::chrono::milliseconds(500));
    auto gone = pidfd.async_wait(asio::posix::stream_descriptor::wait_read,
                                 asio::as_tuple(asio::use_awaitable));
    auto late = co_await (std::move(gone) || grace.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (late.index() == 0) which = decltype(which)(std::in_place_index<0>);
    if (alive.expired()) co_return;
    // A delete may have come meanwhile (a client that killed the QEMU and
    // deleted the sandbox at once): it destroyed the VM, which is then not
    // ours to look at, nor to report (CI once saw vesseld crash here).
    it = held_.find(id);
    if (it == held_.end() || it->second.watch != gen || it->second.sb != sb || !sb->vm()) co_return;
  }
  std::string reason;
  if (which.index() == 0) {
    auto st = co_await sb->vm()->waitExit();
    reason = "its VM exited unexpectedly (" + st.describe() + ")";
  } else {
    reason = "its agent channel failed: " +
             (agent->failure() ? agent->failure()->message() : std::string("closed"));
  }
  // Looked up again: the io thread may have run other work during
  // waitExit(), a delete among it.
  it = held_.find(id);
  if (it == held_.end() || it->second.watch != gen || it->second.sb != sb || !sb->vm()) co_return;
  if (std::string diag = sb->vm()->diagnostics(); !diag.empty()) reason += "; " + diag;
  std::string tenant = it->second.tenant;
  held_.erase(it);
  nodeLog(id).warn("lost: {}", reason);
  consoleDone(id, *sb);  // what the guest said last is often why
  if (start_) start_->forget(id);
  if (network_) co_await network_->detach(id);
  (void)co_await runtime_.destroy(*sb);
  if (!alive.expired() && lost_) lost_(tenant, id, reason);
}

void LocalNode::setConsoleLog(std::shared_ptr<ops::SandboxLog*> log) {
  bool first = !console_;
  start_ = std::make_unique<StartOutput>(log);
  console_ = std::make_unique<ConsoleTail>(std::move(log));
  if (first) asio::co_spawn(io_, consoleLoop(), asio::detached);
}

void LocalNode::consoleDone(const std::string& id, const node::Sandbox& sb) {
  if (console_) console_->poll(id, sb.vmDir() + "/console.log", /*last=*/true);
}

asio::awaitable<void> LocalNode::consoleLoop() {
  auto alive = std::weak_ptr<bool>(alive_);
  asio::steady_timer t(io_);
  for (;;) {
    t.expires_after(std::chrono::seconds(1));
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec || alive.expired()) co_return;
    for (const auto& [id, h] : held_)
      if (h.sb->state() == node::Sandbox::State::kRunning && !busy(id))
        console_->poll(id, h.sb->vmDir() + "/console.log");
  }
}

LocalNode::Load LocalNode::load() const {
  Load l;
  for (const auto& [id, h] : held_) {
    l.ids.push_back(id);
    if (h.sb && h.sb->state() == node::Sandbox::State::kRunning) {
      l.memory_mib += h.sb->memoryMib();
      l.vcpus += h.sb->vcpus();
    }
  }
  return l;
}

}  // namespace vessel::vesseld
