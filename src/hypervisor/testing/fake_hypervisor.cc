#include "hypervisor/testing/fake_hypervisor.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <sstream>

#include "base/offload.h"
#include "base/scope_exit.h"
#include "base/sha256.h"
#include "base/sparse_copy.h"
#include "hypervisor/testing/guest_process.h"

namespace vessel::hypervisor::testing {

namespace fs = std::filesystem;

struct FakeShared {
  std::shared_ptr<GuestCallPolicy> policy = std::make_shared<GuestCallPolicy>();
};

// A VM let go by release(), kept running for adopt().
struct FakeHypervisor::Released {
  pid_t pid = -1;
  Fd pidfd;
  Fd channel;  // our end of the agent channel
  ~Released() {
    if (pidfd) killAndReap(pidfd);
  }
};

namespace {

constexpr const char* kStateMagic = "vessel-fake-state 1";

Status signalGuest(const Fd& pidfd, int sig, const std::string& what) {
  if (::syscall(SYS_pidfd_send_signal, pidfd.get(), sig, nullptr, 0) != 0)
    return Error::fromErrno(what);
  return okStatus();
}

std::string fileTail(const std::string& path, size_t max) {
  auto fd = Fd::open(path, O_RDONLY | O_CLOEXEC);
  if (!fd.ok()) return "";
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0 || st.st_size == 0) return "";
  size_t n = std::min(max, static_cast<size_t>(st.st_size));
  std::string out(n, '\0');
  ssize_t r = ::pread(fd->get(), out.data(), n, st.st_size - static_cast<off_t>(n));
  out.resize(r > 0 ? static_cast<size_t>(r) : 0);
  return out;
}

}  // namespace

Status writeFakeState(const std::string& path, const FakeState& s) {
  std::ostringstream o;
  o << kStateMagic << "\nvcpus " << s.vcpus << "\nmemory_mib " << s.memory_mib
    << "\nnetwork_device " << s.network_device << "\nram_external " << s.ram_external << "\n";
  return writeFileAtomic(path, o.str(), 0600);
}

Status installFakeTemplate(templates::TemplateStore& store, const std::string& staging,
                           const std::string& name, uint64_t memory_mib, bool network) {
  std::error_code ec;
  std::filesystem::create_directories(staging, ec);
  if (ec) return Error(Code::kInternal, "create " + staging + ": " + ec.message());
  templates::Manifest m;
  m.name = name;
  m.version = "v1";
  m.spec_hash = std::string(64, 'a');
  m.qemu_version = "fake";
  m.kernel_sha256 = "k";
  m.cmdline = "quiet";
  m.vcpus = 1;
  m.memory_mib = memory_mib;
  m.created_at = "2026-01-01T00:00:00Z";
  m.network = network;
  VESSEL_TRY(writeFileAtomic(staging + "/" + templates::kRootfsFile, "a root filesystem\n"));
  VESSEL_TRY(writeFileAtomic(staging + "/" + templates::kMemoryFile, "guest RAM\n"));
  VESSEL_TRY(writeFakeState(staging + "/" + templates::kStateFile,
                            {m.vcpus, m.memory_mib, network, true}));
  for (const char* f : {templates::kRootfsFile, templates::kMemoryFile, templates::kStateFile}) {
    VESSEL_ASSIGN_OR_RETURN(m.files[f], sha256File(staging + "/" + f));
  }
  auto t = store.install(staging, m);
  if (!t.ok()) return std::move(t).error();
  return okStatus();
}

Result<FakeState> parseFakeState(std::string_view text) {
  if (text.size() > 4096) return Error(Code::kInvalidArgument, "fake state: too long");
  std::istringstream in{std::string(text)};
  std::string line;
  if (!std::getline(in, line) || line != kStateMagic)
    return Error(Code::kInvalidArgument, "not a fake VM state file");
  FakeState s;
  int seen = 0;
  std::string key;
  uint64_t v = 0;
  while (in >> key >> v) {
    if (key == "vcpus")
      s.vcpus = static_cast<unsigned>(v);
    else if (key == "memory_mib")
      s.memory_mib = v;
    else if (key == "network_device")
      s.network_device = v != 0;
    else if (key == "ram_external")
      s.ram_external = v != 0;
    else
      return Error(Code::kInvalidArgument, "fake state: unknown field " + key);
    ++seen;
  }
  if (seen != 4 || !in.eof()) return Error(Code::kInvalidArgument, "fake state: malformed");
  return s;
}

class FakeVm final : public Vm {
 public:
  FakeVm(FakeHypervisor& hv, MachineSpec spec, GuestProcess g, Socket channel, Fd channel_dup,
         Fd state)
      : hv_(hv),
        spec_(std::move(spec)),
        pid_(g.pid),
        pidfd_(std::move(g.pidfd)),
        channel_(std::move(channel)),
        channel_dup_(std::move(channel_dup)),
        state_(std::move(state)),
        paused_(spec_.incoming),
        loaded_(!spec_.incoming) {
    hv_.vms_[pid_] = this;
  }
  ~FakeVm() override {
    hv_.vms_.erase(pid_);
    if (pidfd_ && !status_) killAndReap(pidfd_);
  }

  const std::string& id() const override { return spec_.id; }
  pid_t pid() const override { return pid_; }
  Socket& agentChannel() override { return channel_; }
  bool reaped() const { return status_.has_value(); }
  const Fd& pidfd() const { return pidfd_; }

  asio::awaitable<ExitStatus> waitExit() override {
    if (!status_) {
      // Our own registration of the pidfd: several may wait at once.
      asio::posix::stream_descriptor sd(co_await asio::this_coro::executor,
                                        ::fcntl(pidfd_.get(), F_DUPFD_CLOEXEC, 0));
      (void)co_await sd.async_wait(asio::posix::stream_descriptor::wait_read,
                                   asio::as_tuple(asio::use_awaitable));
      if (!status_) status_ = tryReap(pidfd_).value_or(ExitStatus{.unknown = true});
    }
    co_return *status_;
  }

  Status writeConsole(std::string_view) override {
    return Error(Code::kUnavailable, "a fake VM has no console");
  }

  std::string diagnostics() const override {
    std::string tail = fileTail(spec_.console_log, 2000);
    return tail.empty() ? "" : "agent stderr: " + tail;
  }

  asio::awaitable<Status> pauseVcpus() override {
    VESSEL_CO_TRY(running("pause"));
    VESSEL_CO_TRY(signalGuest(pidfd_, SIGSTOP, ctx("pause")));
    paused_ = true;
    co_return okStatus();
  }

  asio::awaitable<Status> resumeVcpus() override {
    VESSEL_CO_TRY(running("resume"));
    if (!loaded_)
      co_return Error(Code::kFailedPrecondition, ctx("resume") + ": waiting for its state");
    VESSEL_CO_TRY(signalGuest(pidfd_, SIGCONT, ctx("resume")));
    paused_ = false;
    co_return okStatus();
  }

  asio::awaitable<Status> saveState(const std::string& path, bool ignore_shared) override {
    VESSEL_CO_TRY(running("save state"));
    if (!paused_)
      co_return Error(Code::kFailedPrecondition, ctx("save state") + ": its vCPUs are running");
    FakeState s{spec_.vcpus, spec_.memory_mib, spec_.network_device,
                ignore_shared && spec_.memory_shared && !spec_.memory_file.empty()};
    co_return writeFakeState(path, s);
  }

  asio::awaitable<Status> loadState(bool ignore_shared) override {
    std::string c = ctx("load state");
    VESSEL_CO_TRY(running("load state"));
    if (!spec_.incoming || !state_ || loaded_)
      co_return Error(Code::kFailedPrecondition, c + ": not waiting for a state");
    char buf[4097];
    ssize_t n = ::pread(state_.get(), buf, sizeof buf, 0);
    if (n < 0) co_return Error::fromErrno(c);
    state_.reset();
    auto s = parseFakeState(std::string_view(buf, static_cast<size_t>(n)));
    if (!s.ok()) co_return std::move(s).error().withContext(c);
    if (s->vcpus != spec_.vcpus || s->memory_mib != spec_.memory_mib ||
        s->network_device != spec_.network_device)
      co_return Error(Code::kFailedPrecondition, c + ": the state is of another machine shape");
    if (s->ram_external && (spec_.memory_file.empty() || !ignore_shared))
      co_return Error(Code::kFailedPrecondition,
                      c + ": the state's RAM is in a memory file this machine does not map");
    loaded_ = true;
    co_return okStatus();
  }

  asio::awaitable<Status> stop() override {
    if (stopped_) co_return okStatus();
    stopped_ = true;
    boost::system::error_code ec;
    channel_.close(ec);
    channel_dup_.reset();
    if (!status_) {
      (void)signalGuest(pidfd_, SIGKILL, "stop");
      (void)co_await waitExit();
    }
    std::error_code fec;
    fs::remove_all(spec_.run_dir, fec);
    co_return okStatus();
  }

  void kill() override {
    if (!status_) (void)signalGuest(pidfd_, SIGKILL, "kill");
  }

  void release() override {
    if (stopped_ || status_) return;
    boost::system::error_code ec;
    channel_.close(ec);
    auto r = std::make_unique<FakeHypervisor::Released>();
    r->pid = pid_;
    r->pidfd = std::move(pidfd_);
    r->channel = std::move(channel_dup_);
    hv_.released_[spec_.run_dir] = std::move(r);
    stopped_ = true;
  }

 private:
  std::string ctx(const char* what) const { return std::string(what) + " fake VM " + spec_.id; }
  Status running(const char* what) const {
    if (stopped_ || status_ || !tryAlive())
      return Error(Code::kUnavailable, ctx(what) + ": its agent process has exited");
    return okStatus();
  }
  bool tryAlive() const {
    pollfd p{pidfd_.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }

  FakeHypervisor& hv_;
  MachineSpec spec_;
  pid_t pid_;
  Fd pidfd_;
  Socket channel_;
  // Ours too: the guest's end does not see EOF when the node closes its
  // client (the channel of a VMM outlives its clients), so a released VM
  // can be adopted.
  Fd channel_dup_;
  Fd state_;  // incoming_state_fd's copy, until loadState
  bool paused_, loaded_;
  bool stopped_ = false;
  std::optional<ExitStatus> status_;
};

FakeHypervisor::FakeHypervisor(FakeOptions opts)
    : opts_(std::move(opts)), shared_(std::make_shared<FakeShared>()) {}

FakeHypervisor::~FakeHypervisor() = default;

asio::awaitable<Result<std::unique_ptr<Vm>>> FakeHypervisor::start(MachineSpec spec,
                                                                   Clock::time_point) {
  VESSEL_CO_TRY(validateSpec(spec));
  std::string ctx = "start fake VM " + spec.id;
  if (spec.incoming && !spec.incoming_state_fd)
    co_return Error(Code::kInvalidArgument, ctx + ": incoming without a state fd");
  Fd state;
  if (spec.incoming) {
    state.reset(::fcntl(*spec.incoming_state_fd, F_DUPFD_CLOEXEC, 0));
    if (!state) co_return Error::fromErrno(ctx + ": dup state fd");
  }
  if (!spec.memory_file.empty()) {
    // A shared backend makes its file (a template being written); a
    // private one maps a file that must be there.
    if (spec.memory_shared && !fs::exists(spec.memory_file))
      VESSEL_CO_TRY(writeFileAtomic(spec.memory_file, "fake guest RAM\n", 0600));
    if (::access(spec.memory_file.c_str(), R_OK) != 0)
      co_return Error::fromErrno(ctx + ": memory file " + spec.memory_file);
  }
  std::error_code ec;
  fs::create_directories(spec.run_dir, ec);
  if (ec) co_return Error(Code::kInternal, ctx + ": create " + spec.run_dir + ": " + ec.message());
  ScopeExit rm_run([&] { fs::remove_all(spec.run_dir, ec); });
  std::string passwd = spec.run_dir + "/passwd";
  std::string uid = std::to_string(guestUserId());
  VESSEL_CO_TRY(writeFileAtomic(
      passwd, "root:x:0:0:root:/root:/bin/sh\nuser:x:" + uid + ":" + uid + ":user:/tmp:/bin/sh\n"));
  auto console = Fd::open(spec.console_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (!console.ok()) co_return std::move(console).error().withContext(ctx);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    co_return Error::fromErrno(ctx + ": socketpair");
  Fd host(sv[0]), guest(sv[1]);
  GuestSpawn gs;
  gs.agent_binary = opts_.agent_binary;
  gs.passwd = passwd;
  gs.channel_fd = guest.get();
  gs.stderr_fd = console->get();
  auto g = spawnGuest(gs);
  if (!g.ok()) co_return std::move(g).error().withContext(ctx);
  guest.reset();
  // Stopped until its state is loaded and resumeVcpus runs it. A Hello it
  // sent before the stop is discarded by the node's resync.
  if (spec.incoming) VESSEL_CO_TRY(signalGuest(g->pidfd, SIGSTOP, ctx + ": stop"));
  asio::co_spawn(co_await asio::this_coro::executor,
                 serveGuestCalls(std::make_shared<Fd>(std::move(g->listener)), shared_->policy),
                 asio::detached);
  Fd dup(::fcntl(host.get(), F_DUPFD_CLOEXEC, 0));
  if (!dup) co_return Error::fromErrno(ctx + ": dup");
  Socket channel(co_await asio::this_coro::executor);
  channel.assign(asio::local::stream_protocol(), host.release());
  rm_run.dismiss();
  ++started_;
  co_return std::unique_ptr<Vm>(new FakeVm(*this, std::move(spec), std::move(*g),
                                           std::move(channel), std::move(dup), std::move(state)));
}

asio::awaitable<Result<std::unique_ptr<Vm>>> FakeHypervisor::adopt(MachineSpec spec, pid_t pid,
                                                                   uint64_t start_ticks,
                                                                   Clock::time_point) {
  std::string ctx = "adopt fake VM " + spec.id;
  auto it = released_.find(spec.run_dir);
  if (it == released_.end() || it->second->pid != pid)
    co_return Error(Code::kNotFound, ctx + ": no VM released with pid " + std::to_string(pid));
  if (start_ticks != 0) {
    auto t = processStartTicks(pid);
    if (!t.ok() || *t != start_ticks)
      co_return Error(Code::kNotFound,
                      ctx + ": pid " + std::to_string(pid) + " is another process");
  }
  std::unique_ptr<Released> r = std::move(it->second);
  released_.erase(it);
  if (auto st = tryReap(r->pidfd); st) {
    r->pidfd.reset();
    co_return Error(Code::kUnavailable, ctx + ": its agent has exited (" + st->describe() + ")");
  }
  Fd dup(::fcntl(r->channel.get(), F_DUPFD_CLOEXEC, 0));
  if (!dup) co_return Error::fromErrno(ctx + ": dup");
  Socket channel(co_await asio::this_coro::executor);
  channel.assign(asio::local::stream_protocol(), dup.release());
  spec.incoming = false;
  GuestProcess g;
  g.pid = r->pid;
  g.pidfd = std::move(r->pidfd);
  co_return std::unique_ptr<Vm>(new FakeVm(*this, std::move(spec), std::move(g), std::move(channel),
                                           std::move(r->channel), Fd()));
}

asio::awaitable<Status> FakeHypervisor::stopOrphan(std::string run_dir) {
  released_.erase(run_dir);  // ~Released kills and reaps
  co_return okStatus();
}

asio::awaitable<Status> FakeHypervisor::createOverlay(std::string path, std::string backing,
                                                      std::string backing_format) {
  if (backing_format != "raw" && backing_format != "qcow2")
    co_return Error(Code::kInvalidArgument, "overlay: backing format must be raw or qcow2");
  // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
  auto copy = [backing, path] { return copySparse(backing, path); };
  co_return co_await offload(*disk_thread_, std::move(copy));
}

asio::awaitable<Status> FakeHypervisor::copyDisk(std::string from, std::string to) {
  auto copy = [from, to, hook = on_disk_copy_] {
    if (hook) hook();
    return copySparse(from, to);
  };
  co_return co_await offload(*disk_thread_, std::move(copy));
}

asio::awaitable<Status> FakeHypervisor::flattenDisk(Disk overlay, std::string to, uint64_t) {
  // The fake's disks are plain copies: no header to check.
  auto copy = [from = overlay.path, to] { return copySparse(from, to); };
  co_return co_await offload(*disk_thread_, std::move(copy));
}

Status FakeHypervisor::hang(pid_t pid) {
  auto it = vms_.find(pid);
  if (it == vms_.end()) return Error(Code::kNotFound, "no fake VM with pid " + std::to_string(pid));
  return signalGuest(it->second->pidfd(), SIGSTOP, "hang fake VM");
}

Status FakeHypervisor::crash(pid_t pid) {
  auto it = vms_.find(pid);
  if (it == vms_.end()) return Error(Code::kNotFound, "no fake VM with pid " + std::to_string(pid));
  return signalGuest(it->second->pidfd(), SIGKILL, "crash fake VM");
}

void FakeHypervisor::stallGuestCalls(bool on, std::function<void()> on_stall) {
  shared_->policy->stall = on;
  shared_->policy->on_stall = std::move(on_stall);
}

size_t FakeHypervisor::stalledCalls() const { return shared_->policy->stalled; }

size_t FakeHypervisor::live() const {
  size_t n = released_.size();
  for (const auto& [pid, vm] : vms_)
    if (!vm->reaped()) ++n;
  return n;
}

std::vector<pid_t> FakeHypervisor::pids() const {
  std::vector<pid_t> out;
  for (const auto& [pid, vm] : vms_) out.push_back(pid);
  for (const auto& [dir, r] : released_) out.push_back(r->pid);
  return out;
}

}  // namespace vessel::hypervisor::testing
