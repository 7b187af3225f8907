#include "hypervisor/qemu/qemu.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>
#include <filesystem>

#include "base/child_process_async.h"
#include "base/log.h"
#include "base/offload.h"
#include "base/scope_exit.h"
#include "hypervisor/qemu/argv.h"
#include "hypervisor/qemu/console.h"
#include "hypervisor/qemu/jail_spec.h"
#include "hypervisor/qemu/qmp.h"

namespace vessel::hypervisor::qemu {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// QEMU's stderr, kept like the console log (it is QEMU's to fill).
constexpr uint64_t kStderrMaxBytes = 1 << 20;

// Writes all of data[0, n) to `fd` (a blocking call: for the disk thread).
Status writeAllTo(int fd, const char* data, size_t n) {
  size_t off = 0;
  while (off < n) {
    ssize_t w = ::write(fd, data + off, n - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Error::fromErrno("write");
    }
    off += static_cast<size_t>(w);
  }
  return okStatus();
}

// QEMU killed by SIGBUS: a page of a file it maps could not be backed. For
// a memory file mapped shared (a template build) that is a full disk under
// it; said so, since "connection closed" is all the caller saw.
std::string sigbusHint(const ExitStatus& st, const MachineSpec& spec) {
  if (st.exited || st.signal != SIGBUS || spec.memory_file.empty()) return "";
  return " (a page of its memory file " + spec.memory_file +
         " could not be backed: is that disk full?)";
}

std::string tailOf(const std::string& path, size_t max) {
  auto s = readFile(path, 64 << 20);
  if (!s.ok()) return "";
  std::string& t = *s;
  if (t.size() > max) t = "…" + t.substr(t.size() - max);
  return t;
}

// Connects to a unix socket QEMU is about to create, retrying until it
// appears, QEMU exits or the deadline passes.
asio::awaitable<Result<Socket>> connectWhenReady(const std::string& path, ChildProcess& child,
                                                 Clock::time_point deadline) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer t(ex);
  for (;;) {
    Socket s(ex);
    boost::system::error_code ec;
    s.connect(asio::local::stream_protocol::endpoint(path), ec);
    if (!ec) co_return std::move(s);
    if (auto st = child.tryWait())
      co_return Error(Code::kUnavailable, "qemu exited during start-up: " + st->describe());
    if (Clock::now() >= deadline)
      co_return Error(Code::kDeadlineExceeded, "qemu socket " + path + " not ready in time");
    t.expires_after(5ms);
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

class QemuVm : public Vm {
 public:
  QemuVm(MachineSpec spec, ChildProcess child, std::shared_ptr<QmpClient> qmp, Socket agent,
         std::shared_ptr<ConsoleLog> console, std::string stderr_path,
         std::shared_ptr<ConsoleLog> stderr_log, std::unique_ptr<os::Jail> jail,
         std::shared_ptr<asio::thread_pool> disk)
      : spec_(std::move(spec)),
        jail_(std::move(jail)),
        child_(std::move(child)),
        qmp_(std::move(qmp)),
        agent_(std::move(agent)),
        console_(std::move(console)),
        stderr_path_(std::move(stderr_path)),
        stderr_log_(std::move(stderr_log)),
        disk_(std::move(disk)),
        log_("qemu", spec_.id) {
    // A write the host could not store is the guest's error (werror=report,
    // argv.cc); the host's log says so once per VM (a guest may retry
    // without end).
    qmp_->onEvent([log = log_, logged = false](const std::string& name,
                                               const json::value& data) mutable {
      if (name != "BLOCK_IO_ERROR" || logged) return;
      logged = true;
      const json::value* why = data.is_object() ? data.as_object().if_contains("reason") : nullptr;
      log.warn(
          "a disk write failed on the host and was reported to the guest: {} (further "
          "ones are not logged)",
          why && why->is_string() ? std::string(why->as_string()) : std::string("unknown"));
    });
  }

  ~QemuVm() override {
    // Not stopped gracefully: ChildProcess kills and reaps; remove the files.
    if (!stopped_) cleanup();
  }

  const std::string& id() const override { return spec_.id; }
  pid_t pid() const override { return child_.pid(); }
  Socket& agentChannel() override { return agent_; }

  asio::awaitable<ExitStatus> waitExit() override {
    if (auto st = child_.tryWait()) co_return *st;
    auto ex = co_await asio::this_coro::executor;
    asio::posix::stream_descriptor pidfd(ex, ::dup(child_.pidfd()));
    boost::system::error_code ec;
    co_await pidfd.async_wait(asio::posix::stream_descriptor::wait_read,
                              asio::redirect_error(asio::use_awaitable, ec));
    if (auto st = child_.tryWait()) co_return *st;
    // Cancelled (the Vm is being torn down): report what we know.
    co_return ExitStatus{false, 0, 0};
  }

  Status writeConsole(std::string_view bytes) override { return console_->send(bytes); }

  std::string diagnostics() const override {
    if (stderr_log_) stderr_log_->drainNow();
    std::string d;
    std::string err = tailOf(stderr_path_, 2048);
    if (!err.empty()) d += "qemu stderr: " + err;
    std::string con = tailOf(spec_.console_log, 2048);
    if (!con.empty()) d += (d.empty() ? "" : "; ") + std::string("console tail: ") + con;
    return d;
  }

  asio::awaitable<Status> pauseVcpus() override {
    auto r = co_await qmp_->execute("stop");
    if (!r.ok()) co_return std::move(r).error().withContext("pause " + spec_.id);
    co_return okStatus();
  }

  asio::awaitable<Status> resumeVcpus() override {
    auto r = co_await qmp_->execute("cont");
    if (!r.ok()) co_return std::move(r).error().withContext("resume " + spec_.id);
    co_return okStatus();
  }

  asio::awaitable<Status> saveState(const std::string& path, bool ignore_shared) override {
    auto s = co_await saveStateImpl(path, ignore_shared);
    if (!s.ok()) co_return std::move(s).error().withContext("save state of " + spec_.id);
    co_return s;
  }

  asio::awaitable<Status> loadState(bool ignore_shared) override {
    const std::string ctx = "load state into " + spec_.id;
    if (!spec_.incoming || !spec_.incoming_state_fd)
      co_return Error(Code::kFailedPrecondition, ctx + ": machine was not started for a restore");
    VESSEL_CO_TRY(co_await setIgnoreShared(ignore_shared));
    json::object args;
    args["uri"] = "fd:" + std::to_string(kStateChildFd);
    auto r = co_await qmp_->execute("migrate-incoming", std::move(args));
    if (!r.ok()) co_return std::move(r).error().withContext(ctx);
    auto done = co_await waitMigration(std::chrono::seconds(120));
    if (!done.ok()) {
      std::string diag = diagnostics();
      std::string msg = done.error().context();
      if (!diag.empty()) msg += "; " + diag;
      co_return Error(done.error().code(), std::move(msg)).withContext(ctx);
    }
    co_return okStatus();
  }

  asio::awaitable<Status> resizeDisk(size_t index, uint64_t bytes) override {
    // The drive ids argv.cc gives: disk<i>. block_resize truncates the
    // qcow2's virtual size (an overlay stays sparse) and notifies virtio-blk.
    json::object args;
    args["device"] = "disk" + std::to_string(index);
    args["size"] = bytes;
    auto r = co_await qmp_->execute("block_resize", std::move(args));
    if (!r.ok())
      co_return std::move(r).error().withContext("resize disk " + std::to_string(index) + " of " +
                                                 spec_.id);
    co_return okStatus();
  }

  asio::awaitable<Status> stop() override {
    if (stopped_) co_return okStatus();
    // 1. Ask QEMU to quit over QMP.
    if (!child_.tryWait() && !qmp_->failed()) (void)co_await qmp_->execute("quit", {}, 1s);
    // 2., 3. SIGTERM, then SIGKILL, each after a bounded wait.
    // (g++ 12: named result, see CONTRIBUTING.md "Coroutines under g++ 12" rule 3.)
    const std::chrono::milliseconds grace = 2s;
    auto quit = co_await waitAsync(child_, grace);
    if (!quit.ok()) {
      log_.warn("qemu did not quit over QMP; sending SIGTERM");
      (void)child_.signal(SIGTERM);
      auto term = co_await waitAsync(child_, grace);
      if (!term.ok()) {
        log_.warn("qemu ignored SIGTERM; sending SIGKILL");
        (void)child_.signal(SIGKILL);
        (void)co_await waitAsync(child_, 5s);
      }
    }
    if (jail_ && !child_.running()) {
      // The kernel may count the reaped QEMU in its cgroup for a moment:
      // waited for on a timer here, so ~Jail does not retry in a sleep loop.
      if (auto s = co_await jail_->cgroup().removeAsync(); !s.ok())
        log_.warn("{}", s.error().message());
    }
    cleanup();
    co_return okStatus();
  }

  void kill() override {
    if (!stopped_) (void)child_.signal(SIGKILL);
  }

  void release() override {
    stopped_ = true;
    qmp_->close();
    boost::system::error_code ec;
    agent_.close(ec);
    console_->close();
    if (stderr_log_) stderr_log_->close();
    child_.release();
    if (jail_) jail_->release();
  }

 private:
  asio::awaitable<Status> setIgnoreShared(bool on) {
    json::object cap;
    cap["capability"] = "x-ignore-shared";
    cap["state"] = on;
    json::array caps;
    caps.push_back(std::move(cap));
    // g++ 12: arguments built first, see CONTRIBUTING.md "Coroutines under g++ 12" rule 2.
    json::object args;
    args["capabilities"] = std::move(caps);
    auto r = co_await qmp_->execute("migrate-set-capabilities", std::move(args));
    if (!r.ok()) co_return std::move(r).error();
    co_return okStatus();
  }

  // Polls query-migrate until it completes or fails. Polling (not events)
  // because a migration of a small template finishes in milliseconds.
  asio::awaitable<Status> waitMigration(std::chrono::milliseconds limit) {
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer t(ex);
    auto deadline = Clock::now() + limit;
    for (;;) {
      auto q = co_await qmp_->execute("query-migrate");
      if (!q.ok()) co_return std::move(q).error();
      std::string status;
      if (const auto* o = q->if_object())
        if (const auto* st = o->if_contains("status"); st && st->is_string())
          status = std::string(st->get_string());
      if (status == "completed") co_return okStatus();
      if (status == "failed" || status == "cancelled") {
        std::string why;
        if (const auto* o = q->if_object())
          if (const auto* e = o->if_contains("error-desc"); e && e->is_string())
            why = std::string(e->get_string());
        co_return Error(Code::kFailedPrecondition, "migration " + status + ": " + why);
      }
      if (Clock::now() > deadline)
        co_return Error(Code::kDeadlineExceeded,
                        "migration still '" + status + "' at the deadline");
      t.expires_after(1ms);
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }

  asio::awaitable<Status> saveStateImpl(const std::string& path, bool ignore_shared) {
    auto ex = co_await asio::this_coro::executor;
    VESSEL_CO_TRY(co_await setIgnoreShared(ignore_shared));
    // QEMU connects to a socket of ours and streams the state into it: its
    // seccomp sandbox forbids exec:, and 7.2 has no file: migration.
    std::string sock_path = spec_.run_dir + "/migrate.sock";
    ::unlink(sock_path.c_str());
    asio::local::stream_protocol::acceptor acc(ex);
    boost::system::error_code ec;
    acc.open(asio::local::stream_protocol(), ec);
    if (!ec) acc.bind(asio::local::stream_protocol::endpoint(sock_path), ec);
    if (!ec) acc.listen(1, ec);
    if (ec) co_return Error(Code::kInternal, "listen on " + sock_path + ": " + ec.message());
    // A jailed QEMU connects as its own uid; run_dir (0700, that uid's)
    // keeps everyone else out.
    if (jail_) ::chmod(sock_path.c_str(), 0666);
    ScopeExit unlink_sock([&] { ::unlink(sock_path.c_str()); });
    auto out = Fd::open(path + ".tmp", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (!out.ok()) co_return std::move(out).error();
    ScopeExit unlink_tmp([&] { ::unlink((path + ".tmp").c_str()); });

    json::object args;
    args["uri"] = "unix:" + sock_path;
    auto r = co_await qmp_->execute("migrate", std::move(args));
    if (!r.ok()) co_return std::move(r).error();
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer accept_timeout(ex, 10s);
    auto a = co_await (acc.async_accept(asio::as_tuple(asio::use_awaitable)) ||
                       accept_timeout.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (a.index() != 0 || std::get<0>(std::get<0>(a)))
      co_return Error(Code::kDeadlineExceeded, "qemu did not connect to the migration socket");
    Socket conn = std::move(std::get<1>(std::get<0>(a)));
    // Shared with the disk thread, so it outlives a write in flight.
    auto file = std::make_shared<Fd>(std::move(*out));
    // The stream is read here; each chunk is written, and the file synced,
    // on the disk thread (a guest's RAM: the page cache may hold a writer
    // of that much for seconds).
    std::vector<char> buf(1 << 20);
    // The stream is the guest's to shape (a taken-over QEMU may send
    // without end): capped at its RAM plus device state and page headers.
    const uint64_t cap = stateStreamCap(spec_.memory_mib);
    uint64_t total = 0;
    for (;;) {
      // Whole MiBs (the last one short, with eof): one hand-off per MiB.
      auto [rec, n] =
          co_await asio::async_read(conn, asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      total += n;
      if (total > cap) {
        (void)co_await qmp_->execute("migrate_cancel");
        co_return Error(Code::kResourceExhausted, "the state stream passed " +
                                                      std::to_string(cap >> 20) +
                                                      " MiB (guest RAM plus a margin): refused");
      }
      if (n > 0) {
        // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
        // `len`, not `n` captured: see CONTRIBUTING.md "Coroutines under g++ 12" rule 4.
        auto write = [file, b = std::move(buf), len = n]() mutable {
          Status st = writeAllTo(file->get(), b.data(), len);
          return std::make_pair(std::move(st), std::move(b));
        };
        auto w = co_await offload(*disk_, std::move(write));
        buf = std::move(w.second);
        if (!w.first.ok()) co_return std::move(w.first).error().withContext("write " + path);
      }
      if (rec == asio::error::eof) break;
      if (rec) co_return Error(Code::kUnavailable, "migration stream: " + rec.message());
    }
    VESSEL_CO_TRY(co_await waitMigration(std::chrono::seconds(120)));
    auto sync = [file]() -> Status {
      if (::fsync(file->get()) != 0) return Error::fromErrno("fsync");
      return okStatus();
    };
    Status synced = co_await offload(*disk_, std::move(sync));
    if (!synced.ok()) co_return std::move(synced).error().withContext(path);
    if (::rename((path + ".tmp").c_str(), path.c_str()) != 0)
      co_return Error::fromErrno("rename to " + path);
    unlink_tmp.dismiss();
    co_return okStatus();
  }

  void cleanup() {
    stopped_ = true;
    qmp_->close();
    boost::system::error_code ec;
    agent_.close(ec);
    console_->close();
    if (stderr_log_) stderr_log_->close();
    if (child_.running()) {
      (void)child_.signal(SIGKILL);
      (void)child_.waitFor(5s);
    }
    std::error_code fec;
    fs::remove_all(spec_.run_dir, fec);
    // The process is gone: its cgroup can go, its uid can be leased again.
    jail_.reset();
  }

  MachineSpec spec_;
  // Declared before child_: destroyed after it, once QEMU is reaped.
  std::unique_ptr<os::Jail> jail_;
  ChildProcess child_;
  std::shared_ptr<QmpClient> qmp_;
  Socket agent_;
  std::shared_ptr<ConsoleLog> console_;
  std::string stderr_path_;
  std::shared_ptr<ConsoleLog> stderr_log_;  // none for an adopted QEMU
  std::shared_ptr<asio::thread_pool> disk_;
  Logger log_;
  bool stopped_ = false;
};

}  // namespace

// Long because a start is one ordered sequence (overlay checked and lent,
// sockets, stderr drain, argv, the jailed spawn, QMP handshake) whose
// partial results the one cleanup at the end undoes.
asio::awaitable<Result<std::unique_ptr<Vm>>> QemuHypervisor::start(MachineSpec spec,
                                                                   Clock::time_point deadline) {
  VESSEL_CO_TRY(validateSpec(spec));
  const std::string ctx = "start machine " + spec.id;
  // Before the overlay is lent to the new VM's uid: from then on it could
  // change, and what QEMU opens is decided now.
  if (auto h = checkDiskHeaders(spec); !h.ok()) co_return std::move(h).error().withContext(ctx);
  std::error_code fec;
  if (fs::exists(spec.run_dir, fec) && !fs::is_empty(spec.run_dir, fec))
    co_return Error(Code::kAlreadyExists, ctx + ": run dir " + spec.run_dir + " is in use");
  fs::create_directories(spec.run_dir, fec);
  if (fec)
    co_return Error(Code::kInternal, ctx + ": create " + spec.run_dir + ": " + fec.message());
  fs::permissions(spec.run_dir, fs::perms::owner_all, fec);
  ScopeExit remove_dir([&] { fs::remove_all(spec.run_dir, fec); });

  QemuPaths paths{opts_.binary, spec.run_dir + "/qmp.sock", spec.run_dir + "/console.sock",
                  spec.run_dir + "/agent.sock"};
  // QEMU's stderr is a socket drained into a capped file (as the console
  // is): a QEMU given the file itself could fill the host's disk.
  std::string stderr_path = spec.run_dir + "/qemu.stderr";
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    co_return Error::fromErrno(ctx + ": socketpair for stderr");
  Fd err_fd(sv[1]);
  Socket err_sock(co_await asio::this_coro::executor);
  err_sock.assign(asio::local::stream_protocol(), sv[0]);
  ::shutdown(sv[1], SHUT_RD);
  auto err_log = ConsoleLog::start(std::move(err_sock), stderr_path, kStderrMaxBytes);
  if (!err_log.ok()) co_return std::move(err_log).error().withContext(ctx);

  SpawnOptions so;
  std::unique_ptr<os::Jail> jail;
  Fd memfile;
  if (opts_.jail) {
    // argv[0] stays as given (exec finds it in the jail's /usr through
    // PATH, and process listings keep naming it so).
    if (spec.memory_shared && !spec.memory_file.empty()) {
      // A template build's memory file is QEMU's to create; in the jail it
      // must exist first to be a mount point (QEMU sizes it).
      auto m = Fd::open(spec.memory_file, O_WRONLY | O_CREAT, 0600);
      if (!m.ok()) co_return std::move(m).error().withContext(ctx);
    }
    auto js = jailSpecFor(spec, *opts_.jail, resolveBinary(opts_.binary));
    if (!js.ok()) co_return std::move(js).error().withContext(ctx);
    auto j = os::Jail::create(opts_.jail->jailer, std::move(*js));
    if (!j.ok()) co_return std::move(j).error().withContext(ctx);
    jail = std::move(*j);
    so.env = jailedEnv(spec, *opts_.jail);
    if (!spec.memory_file.empty() && !spec.memory_shared) {
      auto m = Fd::open(spec.memory_file, O_RDONLY);
      if (!m.ok()) co_return std::move(m).error().withContext(ctx);
      memfile = std::move(*m);
      so.fds.push_back({memfile.get(), kMemFileChildFd});
    }
  }
  so.argv = buildArgv(spec, paths);
  so.fds.push_back({err_fd.get(), 2});
  if (spec.tap_fd) so.fds.push_back({*spec.tap_fd, kTapChildFd});
  if (spec.incoming_state_fd) so.fds.push_back({*spec.incoming_state_fd, kStateChildFd});
  // In the jail: as PID 1 of a PID namespace of its own.
  auto child = jail ? jail->spawn(std::move(so)) : ChildProcess::spawn(so);
  if (!child.ok()) co_return std::move(child).error().withContext(ctx);
  err_fd.reset();

  auto fail = [&](Error e) -> Error {
    // Give QEMU a moment to finish writing why it exited.
    auto exit = child->waitFor(200ms);
    (*err_log)->drainNow();
    std::string why = tailOf(stderr_path, 2048);
    // How it ended says more than the closed socket that showed it.
    std::string how = exit.ok() ? "; QEMU " + exit->describe() + sigbusHint(*exit, spec) : "";
    if (!why.empty()) how += "; qemu stderr: " + why;
    if (!how.empty()) e = Error(e.code(), e.context() + how, e.sysErrno());
    return std::move(e).withContext(ctx);
  };

  auto qsock = co_await connectWhenReady(paths.qmp_socket, *child, deadline);
  if (!qsock.ok()) co_return fail(std::move(qsock).error());
  auto qmp = co_await QmpClient::handshake(std::move(*qsock), deadline);
  if (!qmp.ok()) co_return fail(std::move(qmp).error());

  auto csock = co_await connectWhenReady(paths.console_socket, *child, deadline);
  if (!csock.ok()) co_return fail(std::move(csock).error());
  auto console = ConsoleLog::start(std::move(*csock), spec.console_log, spec.console_log_max_bytes);
  if (!console.ok()) co_return fail(std::move(console).error());
  auto asock = co_await connectWhenReady(paths.agent_socket, *child, deadline);
  if (!asock.ok()) co_return fail(std::move(asock).error());

  if (!spec.incoming) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    auto r = co_await (*qmp)->execute("cont", {}, std::max(left, 1ms));
    if (!r.ok()) co_return fail(std::move(r).error());
  }
  remove_dir.dismiss();
  std::unique_ptr<Vm> vm = std::make_unique<QemuVm>(
      std::move(spec), std::move(*child), std::move(*qmp), std::move(*asock), std::move(*console),
      std::move(stderr_path), std::move(*err_log), std::move(jail), disk_);
  co_return vm;
}

asio::awaitable<Result<std::unique_ptr<Vm>>> QemuHypervisor::adopt(MachineSpec spec, pid_t pid,
                                                                   uint64_t start_ticks,
                                                                   Clock::time_point deadline) {
  const std::string ctx = "adopt machine " + spec.id + " (qemu pid " + std::to_string(pid) + ")";
  auto child = ChildProcess::adopt(pid, start_ticks);
  if (!child.ok()) co_return std::move(child).error().withContext(ctx);
  // The pid is alive and started when recorded; make sure it is the QEMU of
  // this machine and not, say, another sandbox's after a mixed-up record.
  QemuPaths paths{opts_.binary, spec.run_dir + "/qmp.sock", spec.run_dir + "/console.sock",
                  spec.run_dir + "/agent.sock"};
  auto cmd = processCmdline(pid);
  if (!cmd.ok() || cmd->find("unix:" + paths.qmp_socket + ",") == std::string::npos) {
    // Not ours: leave it alone.
    child = ChildProcess();
    co_return Error(Code::kNotFound, ctx + ": that process is not this machine's QEMU");
  }
  auto qsock = co_await connectWhenReady(paths.qmp_socket, *child, deadline);
  if (!qsock.ok()) co_return std::move(qsock).error().withContext(ctx);
  auto qmp = co_await QmpClient::handshake(std::move(*qsock), deadline);
  if (!qmp.ok()) co_return std::move(qmp).error().withContext(ctx);
  auto csock = co_await connectWhenReady(paths.console_socket, *child, deadline);
  if (!csock.ok()) co_return std::move(csock).error().withContext(ctx);
  auto console = ConsoleLog::start(std::move(*csock), spec.console_log, spec.console_log_max_bytes,
                                   /*append=*/true);
  if (!console.ok()) co_return std::move(console).error().withContext(ctx);
  auto asock = co_await connectWhenReady(paths.agent_socket, *child, deadline);
  if (!asock.ok()) co_return std::move(asock).error().withContext(ctx);
  std::unique_ptr<os::Jail> jail;
  if (opts_.jail) {
    // Its jail: the uid it runs as (leased again), its cgroup, and the
    // files lent to it. A QEMU of an unjailed vesseld stays unjailed.
    os::JailSpec js;
    js.id = spec.id;
    for (const Disk& d : spec.disks)
      if (!d.read_only) js.owned.push_back(d.path);
    if (!spec.memory_file.empty() && spec.memory_shared) js.owned.push_back(spec.memory_file);
    js.owned.push_back(spec.run_dir);
    auto j = os::Jail::adopt(opts_.jail->jailer, std::move(js), pid);
    if (j.ok())
      jail = std::move(*j);
    else
      Logger("qemu", spec.id).warn("adopted without a jail: {}", j.error().message());
  }
  spec.incoming = false;
  spec.incoming_state_fd.reset();
  // Its stderr went to the earlier vesseld's socket: what it wrote until
  // then stays in the file, anything later is lost (QEMU ignores SIGPIPE).
  std::string stderr_path = spec.run_dir + "/qemu.stderr";
  std::unique_ptr<Vm> vm = std::make_unique<QemuVm>(
      std::move(spec), std::move(*child), std::move(*qmp), std::move(*asock), std::move(*console),
      std::move(stderr_path), nullptr, std::move(jail), disk_);
  co_return vm;
}

}  // namespace vessel::hypervisor::qemu
