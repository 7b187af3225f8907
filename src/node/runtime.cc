#include "node/runtime.h"

#include <fcntl.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <filesystem>

#include "base/log.h"
#include "base/scope_exit.h"
#include "base/sha256.h"
#include "node/guest_deadline.h"
#include "node/runtime_internal.h"
#include "node/sandbox_file.h"

namespace vessel::node {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using internal::PhaseClock;
using internal::validId;

Runtime::Runtime(asio::io_context& io, hypervisor::Hypervisor& hv, templates::TemplateStore& store,
                 RuntimeOptions opts)
    : io_(io),
      hv_(hv),
      store_(store),
      opts_(std::move(opts)),
      pool_(io, store, *this, opts_.pool_size) {
  std::error_code ec;
  fs::create_directories(opts_.root + "/vms", ec);
  fs::create_directories(opts_.root + "/sandboxes", ec);
}

Runtime::~Runtime() = default;

hypervisor::MachineSpec Runtime::machineSpec(const std::string& vm_dir, unsigned vcpus,
                                             uint64_t memory_mib, const std::string& cmdline,
                                             const std::string& backing) const {
  hypervisor::MachineSpec s;
  s.id = fs::path(vm_dir).filename().string();
  s.vcpus = vcpus;
  s.memory_mib = memory_mib;
  s.accel = opts_.accel;
  s.kernel = opts_.kernel;
  s.cmdline = cmdline;
  s.disks = {{vm_dir + "/disk.qcow2", false, "qcow2", backing, "raw"}};
  s.run_dir = vm_dir + "/run";
  s.console_log = vm_dir + "/console.log";
  return s;
}

asio::awaitable<Result<Runtime::Prepared>> Runtime::prepareRestore(
    std::shared_ptr<const templates::Template> t, const std::string& state_file,
    const std::string& base_disk, const std::string& base_format, bool template_memory) {
  Prepared p;
  p.vm_id = newId("vm");
  p.vm_dir = opts_.root + "/vms/" + p.vm_id;
  p.tmpl = t;
  std::error_code ec;
  fs::create_directories(p.vm_dir, ec);
  if (ec) co_return Error(Code::kInternal, "create " + p.vm_dir + ": " + ec.message());
  ScopeExit cleanup([&] { fs::remove_all(p.vm_dir, ec); });
  if (base_format == "qcow2") {
    // A sandbox's own overlay (fork): each child gets a private copy.
    VESSEL_CO_TRY(co_await hv_.copyDisk(base_disk, p.vm_dir + "/disk.qcow2"));
  } else {
    VESSEL_CO_TRY(co_await hv_.createOverlay(p.vm_dir + "/disk.qcow2", base_disk, base_format));
  }
  auto state = Fd::open(state_file, O_RDONLY);
  if (!state.ok()) co_return std::move(state).error().withContext("restore " + t->id());

  hypervisor::MachineSpec s = machineSpec(p.vm_dir, t->manifest.vcpus, t->manifest.memory_mib,
                                          t->manifest.cmdline, t->path(templates::kRootfsFile));
  VESSEL_CO_TRY(co_await attachNetwork(s, t->manifest, p.slot));
  if (template_memory) {
    // Copy-on-write view of the template's RAM: pages are shared with every
    // other clone until written, and nothing is written back to the file.
    s.memory_file = t->path(templates::kMemoryFile);
    s.memory_shared = false;
  }
  s.incoming = true;
  s.incoming_state_fd = state->get();
  auto vm = co_await hv_.start(s, Clock::now() + 30s);
  if (!vm.ok()) {
    co_await releaseSlot(p.slot);
    co_return std::move(vm).error().withContext("restore " + t->id());
  }
  p.vm = std::move(*vm);
  cleanup.dismiss();
  co_return p;
}

void Runtime::abort(const std::string& id) {
  auto it = making_.find(id);
  if (it == making_.end()) return;
  aborted_.insert(id);
  if (it->second) it->second->kill();
}

Status Runtime::checkAborted(const std::string& id) const {
  if (aborted_.count(id)) return Error(Code::kUnavailable, "sandbox " + id + ": aborted");
  return okStatus();
}

Status Runtime::discardFiles(const std::string& id) {
  if (!validId(id)) return Error(Code::kInvalidArgument, "bad sandbox id '" + id + "'");
  std::string dir = opts_.root + "/sandboxes/" + id;
  SandboxFile file;
  std::error_code ec;
  if (auto rec = readRecord(id, file); rec.ok()) {
    if (!(*rec)->vm_dir_.empty()) fs::remove_all((*rec)->vm_dir_, ec);
  }
  fs::remove_all(dir, ec);
  if (ec) return Error(Code::kInternal, "remove " + dir + ": " + ec.message());
  return okStatus();
}

asio::awaitable<Status> Runtime::attachNetwork(hypervisor::MachineSpec& s,
                                               const templates::Manifest& m,
                                               std::unique_ptr<network::Slot>& slot) {
  if (!m.network) co_return okStatus();  // an old template: restoring it must not add a device
  s.network_device = true;
  if (!opts_.slots) co_return okStatus();
  auto sl = co_await opts_.slots->acquireAsync();
  if (!sl.ok()) co_return std::move(sl).error().withContext("network slot");
  slot = std::move(*sl);
  s.tap_fd = slot->tapFd();
  co_return okStatus();
}

asio::awaitable<void> Runtime::releaseSlot(std::unique_ptr<network::Slot>& slot) {
  std::unique_ptr<network::Slot> s = std::move(slot);
  // Its teardown (`nft`, `ip`) runs on a thread of the pool's.
  if (s && opts_.slots) co_await opts_.slots->releaseAsync(std::move(s));
}

asio::awaitable<Result<std::shared_ptr<agentclient::AgentClient>>> Runtime::restoreVm(
    hypervisor::Vm& vm, bool from_template, std::string name,
    std::vector<std::pair<std::string, double>>& phases) {
  PhaseClock pc(phases);
  VESSEL_CO_TRY(co_await vm.loadState(from_template));
  pc.mark("load_state");
  VESSEL_CO_TRY(co_await vm.resumeVcpus());
  pc.mark("cont");
  // The agent still believes in the session it had at snapshot time:
  // reconnect() resynchronises it (docs/agent-protocol.md, Resync). A
  // template snapshot is taken with the channel idle, so its agent's
  // decoder is known to be in step; a paused or forked one may not be.
  auto c = co_await agentclient::AgentClient::reconnect(
      std::move(vm.agentChannel()), name, Clock::now() + opts_.ready_timeout, from_template);
  if (!c.ok()) {
    std::string diag = vm.diagnostics();
    std::string msg = c.error().context();
    if (!diag.empty()) msg += "; " + diag;
    co_return Error(c.error().code(), std::move(msg));
  }
  pc.mark("agent_reconnect");
  (*c)->setReplyTimeout(opts_.agent_reply_timeout);
  co_return std::move(*c);
}

asio::awaitable<Status> Runtime::finishRestore(Sandbox& sb, bool ignore_shared) {
  auto c = co_await restoreVm(*sb.vm_, ignore_shared, sb.id_, sb.phases_ms_);
  if (!c.ok()) co_return std::move(c).error();
  sb.agent_ = std::move(*c);
  PhaseClock pc(sb.phases_ms_);
  auto id = co_await applyIdentity(sb);
  pc.mark("identity");
  co_return id;
}

asio::awaitable<Result<Runtime::Prepared>> Runtime::prepare(
    std::shared_ptr<const templates::Template> t) {
  co_return co_await prepareRestore(t, t->path(templates::kStateFile),
                                    t->path(templates::kRootfsFile), "raw", true);
}

asio::awaitable<Status> Runtime::warm(Prepared& p) {
  if (opts_.pool_mode != RuntimeOptions::PoolMode::kWarm) co_return okStatus();
  std::vector<std::pair<std::string, double>> phases;
  auto c = co_await restoreVm(*p.vm, true, p.vm_id, phases);
  if (!c.ok()) co_return std::move(c).error().withContext("warm " + p.vm_id);
  // One command through the agent's exec path (fork, exec, wait, exit
  // report): the guest code a sandbox's first command runs is translated
  // now rather than then. No user code runs before the identity is set.
  // As the template's default user: that is the path a first command takes.
  if (opts_.warm_exec) {
    agentclient::ExecSpec ex;
    ex.argv = {"true"};
    auto r = co_await (*c)->run(std::move(ex));
    if (!r.ok()) co_return std::move(r).error().withContext("warm " + p.vm_id);
    if (!r->exit.exited || r->exit.code != 0)
      co_return Error(Code::kInternal, "warm " + p.vm_id + ": `true` failed in the guest");
    // The user's login shell, interactive, as E2B's SDKs start it for every
    // command (`bash -l -c`) and terminal (`bash -i -l`): its startup files
    // run programs of their own (id, dircolors), and translating all that
    // here takes a few hundred milliseconds off a sandbox's first command
    // and first terminal. Best effort: a template's shell is its own
    // business, and a slow or failing one only leaves that path cold.
    agentclient::ExecSpec sh;
    sh.argv = {"/bin/sh", "-c",
               "\"${SHELL:-/bin/sh}\" -i -l -c true </dev/null >/dev/null 2>&1; exit 0"};
    sh.timeout = std::chrono::seconds(10);
    if (auto w = co_await (*c)->run(std::move(sh)); !w.ok())
      co_return std::move(w).error().withContext("warm " + p.vm_id);
  }
  // The network most creates ask for, set up now rather than in the
  // create (the same layout in every slot).
  if (opts_.warm_network && p.slot) {
    auto setup = configureGuestNetwork(**c, p.slot.get(), *opts_.warm_network, std::nullopt);
    auto n = co_await withGuestDeadline(*c, opts_.guest_call_timeout, "warm " + p.vm_id,
                                        std::move(setup));
    if (!n.ok()) co_return std::move(n).error().withContext("warm " + p.vm_id);
    p.net = opts_.warm_network;
  }
  // The disk most creates ask for (the template's default), grown now: a
  // block_resize and a filesystem grow are two guest round trips a create
  // would otherwise wait for.
  if (p.tmpl && opts_.grow_disks) {
    uint64_t mib = p.tmpl->defaultDiskMib();
    if (Status g = co_await growDiskTo(*p.vm, *c, mib, "warm " + p.vm_id); !g.ok())
      co_return std::move(g).error();
    p.disk_mib = mib;
  }
  p.agent = std::move(*c);
  co_return okStatus();
}

asio::awaitable<void> Runtime::discard(Prepared p) {
  if (p.agent) p.agent->close();
  if (p.vm) (void)co_await p.vm->stop();
  co_await releaseSlot(p.slot);
  std::error_code ec;
  fs::remove_all(p.vm_dir, ec);
}

Status Runtime::writeRecord(const Sandbox& sb) {
  SandboxFile f;
  f.id = sb.id_;
  f.template_id = sb.template_id_;
  f.vm_dir = sb.vm_dir_;
  f.hostname = sb.hostname_;
  f.env = sb.env_;
  f.network = sb.net_;
  // Its VM has a tap in this slot: adopt() takes the slot over with it.
  if (sb.slot_) f.network_slot = sb.slot_->index();
  f.vcpus = sb.vcpus_;
  f.memory_mib = sb.memory_mib_;
  f.disk_mib = sb.disk_mib_;
  f.paused = sb.state_ == Sandbox::State::kPaused;
  f.disk_only = f.paused && sb.disk_only_;
  f.start_pid = sb.start_pid_;
  // What a later vesseld needs to take the running VM over (adopt()).
  if (sb.vm_ && sb.vm_->pid() > 0) {
    f.vm_pid = sb.vm_->pid();
    if (auto ticks = processStartTicks(sb.vm_->pid()); ticks.ok()) f.vm_start_ticks = *ticks;
  }
  return writeFileAtomic(sb.dir_ + "/sandbox.json", encodeSandboxFile(f), 0600);
}

asio::awaitable<Result<std::shared_ptr<Sandbox>>> Runtime::create(std::string template_name,
                                                                  CreateOptions opts) {
  auto t0 = Clock::now();
  auto t = store_.open(template_name);
  if (!t.ok()) co_return std::move(t).error();
  auto sb = std::make_shared<Sandbox>();
  sb->phases_ms_.emplace_back("open_template",
                              std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  sb->id_ = opts.id.empty() ? newId("sb") : opts.id;
  if (!validId(sb->id_))
    co_return Error(Code::kInvalidArgument, "bad sandbox id '" + sb->id_ + "'");
  sb->dir_ = opts_.root + "/sandboxes/" + sb->id_;
  CreateAttempt attempt(*this, sb);
  VESSEL_CO_TRY(attempt.makeDir());
  sb->template_id_ = (*t)->id();
  sb->hostname_ = opts.hostname.empty() ? sb->id_ : opts.hostname;
  // The template's defaults, under the create's own (the later entry wins).
  sb->env_ = (*t)->manifest.env;
  sb->env_.insert(sb->env_.end(), opts.env.begin(), opts.env.end());
  sb->net_ = opts.network;
  sb->vcpus_ = (*t)->manifest.vcpus;
  sb->memory_mib_ = (*t)->manifest.memory_mib;
  std::string ctx = "create sandbox " + sb->id_ + " from " + (*t)->id();
  if (opts.disk_mib) {
    // QEMU would shrink a qcow2 under a live filesystem if asked to.
    uint64_t base = (*t)->baseDiskMib();
    if (base == 0 || opts.disk_mib < base)
      co_return Error(Code::kInvalidArgument, ctx + ": disk of " + std::to_string(opts.disk_mib) +
                                                  " MiB is below the template image's " +
                                                  std::to_string(base) + " MiB");
    sb->disk_mib_ = opts.disk_mib;
  }
  // Not a conditional expression: CONTRIBUTING.md "Coroutines under g++ 12" rule 3.
  Status made = okStatus();
  if (opts.cold) {
    made = co_await createCold(attempt, **t);
  } else {
    made = co_await createRestored(attempt, template_name, *t);
    sb->start_pid_ = (*t)->manifest.start_pid;  // running in the snapshot's memory
  }
  if (made.ok()) {
    store_.acquire(sb->template_id_);
    auto t1 = Clock::now();
    made = writeRecord(*sb);
    if (!made.ok()) store_.release(sb->template_id_);
    sb->phases_ms_.emplace_back(
        "write_record", std::chrono::duration<double, std::milli>(Clock::now() - t1).count());
  }
  if (!made.ok()) {
    co_await attempt.rollback();
    co_return std::move(made).error().withContext(ctx);
  }
  co_return attempt.commit();
}

asio::awaitable<Status> Runtime::createCold(CreateAttempt& attempt, const templates::Template& t) {
  Sandbox& sb = attempt.sb();
  attempt.ownVmDir(opts_.root + "/vms/" + newId("vm"));
  std::error_code ec;
  fs::create_directories(sb.vm_dir_, ec);
  VESSEL_CO_TRY(co_await hv_.createOverlay(sb.vm_dir_ + "/disk.qcow2",
                                           t.path(templates::kRootfsFile), "raw"));
  hypervisor::MachineSpec s = machineSpec(sb.vm_dir_, sb.vcpus_, sb.memory_mib_, t.manifest.cmdline,
                                          t.path(templates::kRootfsFile));
  VESSEL_CO_TRY(co_await attachNetwork(s, t.manifest, sb.slot_));
  auto m = co_await bootMachine(hv_, s, Clock::now() + opts_.ready_timeout);
  if (!m.ok()) co_return std::move(m).error();
  attempt.holdVm(std::move(m->vm));
  sb.agent_ = agentclient::AgentClient::create(std::move(sb.vm_->agentChannel()),
                                               std::move(m->leftover), sb.id_);
  sb.agent_->setReplyTimeout(opts_.agent_reply_timeout);
  VESSEL_CO_TRY(co_await applyIdentity(sb));
  co_return co_await growDisk(sb);
}

asio::awaitable<Status> Runtime::createRestored(CreateAttempt& attempt,
                                                const std::string& template_name,
                                                std::shared_ptr<const templates::Template> t) {
  Sandbox& sb = attempt.sb();
  // A warm VM that died while it waited (it is only found out now) is
  // discarded and the create goes on with the next one.
  for (int n = 0;; ++n) {
    Prepared p;
    PhaseClock pc(sb.phases_ms_);
    // A pooled VM's disk was grown to the template's default; a sandbox
    // that asks for less cannot have it (a filesystem does not shrink).
    bool smaller = opts_.grow_disks && sb.disk_mib_ && sb.disk_mib_ < t->defaultDiskMib();
    auto pooled = smaller ? std::nullopt : pool_.take(template_name, t->id(), n == 0);
    // Now, not after the create: in a burst the pool starts making what
    // the next creates will want (at a lower priority than this one).
    pool_.refillLater(template_name);
    if (pooled) {
      p = std::move(*pooled);
      pc.mark("from_pool");
    } else {
      auto r = co_await prepareRestore(t, t->path(templates::kStateFile),
                                       t->path(templates::kRootfsFile), "raw", true);
      if (!r.ok()) co_return std::move(r).error();
      p = std::move(*r);
      pc.mark("start_qemu");
    }
    bool was_warm = p.agent != nullptr;
    uint64_t grown_mib = was_warm ? p.disk_mib : 0;
    attempt.ownVmDir(p.vm_dir);
    attempt.holdVm(std::move(p.vm));
    if (Status a = checkAborted(sb.id_); !a.ok()) sb.vm_->kill();
    sb.slot_ = std::move(p.slot);
    Status fin = okStatus();
    if (was_warm) {
      sb.agent_ = std::move(p.agent);
      sb.agent_->setName(sb.id_);
      fin = co_await applyIdentity(sb, p.net);
      pc.mark("identity");
    } else {
      fin = co_await finishRestore(sb, true);
    }
    if (fin.ok()) {
      fin = co_await growDisk(sb, grown_mib);
      pc.mark("grow_disk");
    }
    if (fin.ok()) break;
    co_await attempt.dropVm();
    if (!was_warm || n >= 2 || !checkAborted(sb.id_).ok()) {
      pool_.refillLater(template_name);
      co_return fin;
    }
    Logger("runtime", sb.id_)
        .warn("pooled VM {} failed, trying another: {}", p.vm_id, fin.error().message());
  }
  pool_.refillLater(template_name);  // if the one above stopped early
  co_return okStatus();
}

asio::awaitable<Status> Runtime::pause(Sandbox& sb, bool keep_memory) {
  std::string ctx = "pause sandbox " + sb.id_;
  if (sb.state_ != Sandbox::State::kRunning)
    co_return Error(Code::kFailedPrecondition, ctx + ": sandbox is not running");
  if (!keep_memory) co_return co_await pauseDiskOnly(sb);
  auto s = co_await sb.vm_->pauseVcpus();
  if (s.ok()) s = co_await sb.vm_->saveState(sb.dir_ + "/pause.state", false);
  if (!s.ok()) {
    (void)co_await sb.vm_->resumeVcpus();
    co_return std::move(s).error().withContext(ctx);
  }
  sb.agent_->close();
  sb.agent_.reset();
  (void)co_await sb.vm_->stop();
  sb.vm_.reset();
  co_await releaseSlot(sb.slot_);  // resume takes a fresh one
  sb.state_ = Sandbox::State::kPaused;
  VESSEL_CO_TRY(writeRecord(sb));
  co_return okStatus();
}

Result<std::shared_ptr<Sandbox>> Runtime::readRecord(const std::string& id, SandboxFile& f) const {
  std::string dir = opts_.root + "/sandboxes/" + id;
  auto text = readFile(dir + "/sandbox.json");
  if (!text.ok()) return Error(Code::kNotFound, "no sandbox record: " + text.error().message());
  VESSEL_ASSIGN_OR_RETURN(f, decodeSandboxFile(*text));
  auto sb = std::make_shared<Sandbox>();
  sb->id_ = id;
  sb->dir_ = dir;
  sb->vm_dir_ = f.vm_dir;
  sb->template_id_ = f.template_id;
  sb->hostname_ = f.hostname;
  sb->env_ = f.env;
  sb->net_ = f.network;
  sb->vcpus_ = f.vcpus;
  sb->memory_mib_ = f.memory_mib;
  sb->disk_mib_ = f.disk_mib;
  sb->disk_only_ = f.paused && f.disk_only;
  sb->start_pid_ = f.start_pid;
  return sb;
}

asio::awaitable<Result<std::shared_ptr<Sandbox>>> Runtime::resume(const std::string& id) {
  std::string ctx = "resume sandbox " + id;
  if (!validId(id)) co_return Error(Code::kInvalidArgument, ctx + ": bad id");
  making_[id] = nullptr;
  ScopeExit unmark([this, id] {
    making_.erase(id);
    aborted_.erase(id);
  });
  SandboxFile file;
  auto rec = readRecord(id, file);
  if (!rec.ok()) co_return std::move(rec).error().withContext(ctx);
  std::shared_ptr<Sandbox> sb = std::move(*rec);
  std::string dir = sb->dir_;
  if (!file.paused) co_return Error(Code::kFailedPrecondition, ctx + ": sandbox is not paused");
  auto at = sb->template_id_.find('@');
  auto t = store_.open(sb->template_id_.substr(0, at), sb->template_id_.substr(at + 1));
  if (!t.ok()) co_return std::move(t).error().withContext(ctx);
  if (sb->disk_only_) {
    Status b = co_await bootDisk(*sb, **t);
    if (!b.ok()) co_return std::move(b).error().withContext(ctx);
    sb->state_ = Sandbox::State::kRunning;
    sb->disk_only_ = false;
    sb->start_pid_ = 0;  // a new boot: no start command, and its pid may be another's
    store_.acquire(sb->template_id_);
    VESSEL_CO_TRY(writeRecord(*sb));
    co_return sb;
  }

  auto state = Fd::open(dir + "/pause.state", O_RDONLY);
  if (!state.ok()) co_return std::move(state).error().withContext(ctx);
  hypervisor::MachineSpec s =
      machineSpec(sb->vm_dir_, sb->vcpus_, sb->memory_mib_, (*t)->manifest.cmdline,
                  (*t)->path(templates::kRootfsFile));
  s.incoming = true;
  s.incoming_state_fd = state->get();
  Status n = co_await attachNetwork(s, (*t)->manifest, sb->slot_);
  if (!n.ok()) co_return std::move(n).error().withContext(ctx);
  auto vm = co_await hv_.start(s, Clock::now() + 30s);
  if (!vm.ok()) {
    co_await releaseSlot(sb->slot_);
    co_return std::move(vm).error().withContext(ctx);
  }
  sb->vm_ = std::move(*vm);
  making_[id] = sb->vm_.get();
  Status fin = checkAborted(id);
  if (fin.ok()) fin = co_await finishRestore(*sb, false);
  if (!fin.ok()) {
    if (sb->agent_) sb->agent_->close();
    (void)co_await sb->vm_->stop();
    co_await releaseSlot(sb->slot_);
    co_return std::move(fin).error().withContext(ctx);
  }
  std::error_code ec;
  fs::remove(dir + "/pause.state", ec);
  sb->state_ = Sandbox::State::kRunning;
  store_.acquire(sb->template_id_);
  VESSEL_CO_TRY(writeRecord(*sb));
  co_return sb;
}

asio::awaitable<Status> Runtime::pauseDiskOnly(Sandbox& sb) {
  std::string ctx = "pause sandbox " + sb.id_ + " (disk only)";
  // What the guest wrote must be on its disk, not in its page cache, before
  // its memory goes; QEMU flushes its own caches into the overlay as it quits.
  agentclient::ExecSpec ex;
  ex.argv = {"sync"};
  ex.user = "root";
  ex.timeout = opts_.guest_call_timeout;
  auto r = co_await withGuestDeadline(sb.agent_, opts_.guest_call_timeout, ctx,
                                      sb.agent_->run(std::move(ex)));
  if (!r.ok()) co_return std::move(r).error().withContext(ctx);
  if (!r->exit.exited || r->exit.code != 0)
    co_return Error(Code::kInternal, ctx + ": sync failed in the guest");
  sb.agent_->close();
  sb.agent_.reset();
  if (auto s = co_await sb.vm_->stop(); !s.ok())
    Logger("runtime", sb.id_).warn("stop after sync: {}", s.error().message());
  sb.vm_.reset();
  co_await releaseSlot(sb.slot_);  // resume takes a fresh one
  sb.state_ = Sandbox::State::kPaused;
  sb.disk_only_ = true;
  VESSEL_CO_TRY(writeRecord(sb));
  co_return okStatus();
}

asio::awaitable<Status> Runtime::bootDisk(Sandbox& sb, const templates::Template& t) {
  const templates::Manifest& m = t.manifest;
  // The template's kernel and command line, as a cold create boots them,
  // on the sandbox's own overlay (its filesystem already grown to disk_mib).
  hypervisor::MachineSpec s =
      machineSpec(sb.vm_dir_, sb.vcpus_, sb.memory_mib_, m.cmdline, t.path(templates::kRootfsFile));
  VESSEL_CO_TRY(co_await attachNetwork(s, m, sb.slot_));
  auto booted = co_await bootMachine(hv_, s, Clock::now() + opts_.ready_timeout);
  if (!booted.ok()) {
    co_await releaseSlot(sb.slot_);
    co_return std::move(booted).error();
  }
  sb.vm_ = std::move(booted->vm);
  making_[sb.id_] = sb.vm_.get();
  sb.agent_ = agentclient::AgentClient::create(std::move(sb.vm_->agentChannel()),
                                               std::move(booted->leftover), sb.id_);
  sb.agent_->setReplyTimeout(opts_.agent_reply_timeout);
  Status fin = checkAborted(sb.id_);
  if (fin.ok()) fin = co_await applyIdentity(sb);
  if (!fin.ok()) {
    sb.agent_->close();
    sb.agent_.reset();
    (void)co_await sb.vm_->stop();
    sb.vm_.reset();
    co_await releaseSlot(sb.slot_);
    co_return fin;
  }
  co_return okStatus();
}

asio::awaitable<Status> Runtime::destroy(Sandbox& sb) {
  if (sb.agent_) sb.agent_->close();
  if (sb.vm_) (void)co_await sb.vm_->stop();
  sb.vm_.reset();
  sb.agent_.reset();
  co_await releaseSlot(sb.slot_);
  std::error_code ec;
  fs::remove_all(sb.vm_dir_, ec);
  fs::remove_all(sb.dir_, ec);
  store_.release(sb.template_id_);
  co_return okStatus();
}

}  // namespace vessel::node
