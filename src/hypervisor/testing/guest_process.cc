#include "hypervisor/testing/guest_process.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/random.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>
#include <vector>

#include "base/exec_child.h"
#include "base/scope_exit.h"

namespace vessel::hypervisor::testing {

namespace asio = boost::asio;

namespace {

// The calls a guest's identity makes that would reach the host outside a
// VM: setting the clock (CAP_SYS_TIME is the init namespace's) and
// crediting or resetting the host's entropy pool. sethostname needs no
// entry: it changes the guest's own UTS namespace.
Result<std::vector<sock_filter>> guestCallFilter() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return Error(Code::kInternal, "seccomp_init failed");
  ScopeExit release([&] { seccomp_release(ctx); });
  int rc = 0;
  for (int nr : {SCMP_SYS(clock_settime), SCMP_SYS(settimeofday)})
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 0);
  // ioctl's request is 32 bits wide in the kernel: compare only those.
  for (unsigned long req : std::initializer_list<unsigned long>{
           RNDADDENTROPY, RNDRESEEDCRNG, RNDADDTOENTCNT, RNDZAPENTCNT, RNDCLEARPOOL})
    if (rc == 0)
      rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(ioctl), 1,
                            SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, req));
  if (rc != 0) return Error::fromErrno("seccomp_rule_add", -rc);
  Fd mem(::memfd_create("fake-guest-filter", MFD_CLOEXEC));
  if (!mem) return Error::fromErrno("memfd_create");
  if ((rc = seccomp_export_bpf(ctx, mem.get())) != 0)
    return Error::fromErrno("seccomp_export_bpf", -rc);
  off_t size = ::lseek(mem.get(), 0, SEEK_CUR);
  if (size <= 0 || size % sizeof(sock_filter) != 0)
    return Error(Code::kInternal, "seccomp_export_bpf wrote no whole program");
  std::vector<sock_filter> prog(static_cast<size_t>(size) / sizeof(sock_filter));
  if (::pread(mem.get(), prog.data(), static_cast<size_t>(size), 0) != size)
    return Error::fromErrno("read seccomp program");
  return prog;
}

// clone3's arguments (linux/sched.h's clone_args, version 0), spelled out:
// that header clashes with glibc's <sched.h>.
struct CloneArgs {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

// What the child reports on the sync socket.
enum : char { kGo = 'G', kListener = 'L', kFailed = 'E' };
struct ChildFailure {
  char kind = kFailed;
  char step = 0;
  int err = 0;
};

struct ChildPlan {
  std::vector<char*> argv, envp;
  int channel_fd, stderr_fd, sync_fd, devnull_fd;
  sock_fprog prog;
};

// Between clone3 and exec: a copy of a possibly multithreaded process, so
// only async-signal-safe calls on what the plan prepared.
[[noreturn]] void guestChild(const ChildPlan& p) {
  auto fail = [&](char step) {
    ChildFailure f{kFailed, step, errno};
    (void)!::send(p.sync_fd, &f, sizeof f, MSG_NOSIGNAL);
    ::_exit(127);
  };
  char go = 0;
  if (::recv(p.sync_fd, &go, 1, 0) != 1 || go != kGo) ::_exit(127);  // id maps written
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::setsid();
  resetSignalsForExec();
  // Nothing mounted in here reaches the host's mount table.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail('m');
  // Its own processes in /proc; not every host allows a new proc mount.
  (void)::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  if (::chdir("/") != 0) fail('c');
  if (::dup2(p.channel_fd, 3) < 0 || ::dup2(p.stderr_fd, 2) < 0 || ::dup2(p.devnull_fd, 0) < 0 ||
      ::dup2(p.devnull_fd, 1) < 0)
    fail('d');
  // Everything above 3 goes at exec; the sync socket stays until then.
  ::close_range(4, ~0U, CLOSE_RANGE_CLOEXEC);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail('n');
  int listener = static_cast<int>(
      ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &p.prog));
  if (listener < 0) fail('s');
  char kind = kListener;
  iovec iov{&kind, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &listener, sizeof listener);
  if (::sendmsg(p.sync_fd, &msg, MSG_NOSIGNAL) != 1) fail('l');
  ::close(listener);
  ::execve(p.argv[0], p.argv.data(), p.envp.data());
  fail('e');
  ::_exit(127);
}

const char* stepName(char step) {
  switch (step) {
    case 'm': return "make mounts private";
    case 'c': return "chdir /";
    case 'd': return "set up fds";
    case 'n': return "no_new_privs";
    case 's': return "install seccomp filter";
    case 'l': return "send seccomp listener";
    default: return "exec";
  }
}

// /proc files take one write(2); no temporary file and rename.
Status writeProc(const std::string& path, const std::string& text) {
  auto fd = Fd::open(path, O_WRONLY | O_CLOEXEC);
  if (!fd.ok()) return std::move(fd).error();
  if (::write(fd->get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return Error::fromErrno("write " + path);
  return okStatus();
}

Status writeIdMaps(pid_t pid) {
  std::string proc = "/proc/" + std::to_string(pid);
  if (::geteuid() == 0) {
    // The host's ids as they are: the agent's switch to the guest's "user"
    // (uid 1000) works as in a VM; what it may do to the host is what the
    // test's root may, minus the capabilities the kernel checks in the
    // initial namespace (clock, entropy, hostname of the host).
    VESSEL_TRY(writeProc(proc + "/uid_map", "0 0 4294967295\n"));
    VESSEL_TRY(writeProc(proc + "/gid_map", "0 0 4294967295\n"));
    return okStatus();
  }
  VESSEL_TRY(writeProc(proc + "/setgroups", "deny\n"));
  VESSEL_TRY(writeProc(proc + "/uid_map", "0 " + std::to_string(::geteuid()) + " 1\n"));
  VESSEL_TRY(writeProc(proc + "/gid_map", "0 " + std::to_string(::getegid()) + " 1\n"));
  return okStatus();
}

}  // namespace

unsigned guestUserId() { return ::geteuid() == 0 ? 1000 : 0; }

std::optional<ExitStatus> tryReap(const Fd& pidfd) {
  siginfo_t info{};
  if (::waitid(P_PIDFD, static_cast<id_t>(pidfd.get()), &info, WEXITED | WNOHANG) != 0)
    return ExitStatus{.unknown = true};  // reaped already, or not ours
  if (info.si_pid == 0) return std::nullopt;
  ExitStatus st;
  st.exited = info.si_code == CLD_EXITED;
  (st.exited ? st.code : st.signal) = info.si_status;
  return st;
}

ExitStatus killAndReap(const Fd& pidfd) {
  ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
  siginfo_t info{};
  while (::waitid(P_PIDFD, static_cast<id_t>(pidfd.get()), &info, WEXITED) != 0) {
    if (errno != EINTR) return ExitStatus{.unknown = true};
  }
  ExitStatus st;
  st.exited = info.si_code == CLD_EXITED;
  (st.exited ? st.code : st.signal) = info.si_status;
  return st;
}

Result<GuestProcess> spawnGuest(const GuestSpawn& s) {
  std::string ctx = "spawn fake guest " + s.agent_binary;
  auto filter = guestCallFilter();
  if (!filter.ok()) return std::move(filter).error().withContext(ctx);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return Error::fromErrno(ctx + ": socketpair");
  Fd ours(sv[0]), theirs(sv[1]);
  auto devnull = Fd::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (!devnull.ok()) return std::move(devnull).error().withContext(ctx);
  // Above every fd the child maps, so no dup2 there overwrites a source.
  auto high = [](int fd) { return ::fcntl(fd, F_DUPFD_CLOEXEC, 100); };
  Fd channel(high(s.channel_fd)), err(high(s.stderr_fd)), sync(high(theirs.get())),
      null(high(devnull->get()));
  if (!channel || !err || !sync || !null) return Error::fromErrno(ctx + ": dup");

  std::vector<std::string> args = {s.agent_binary, "--channel-fd", "3", "--passwd", s.passwd};
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  ChildPlan plan;
  for (auto& a : args) plan.argv.push_back(a.data());
  plan.argv.push_back(nullptr);
  for (auto& e : env) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);
  plan.channel_fd = channel.get();
  plan.stderr_fd = err.get();
  plan.sync_fd = sync.get();
  plan.devnull_fd = null.get();
  plan.prog.len = static_cast<unsigned short>(filter->size());
  plan.prog.filter = filter->data();

  int pidfd = -1;
  CloneArgs ca{};
  ca.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWNS | CLONE_NEWIPC | CLONE_PIDFD;
  ca.pidfd = reinterpret_cast<uint64_t>(&pidfd);  // SAFETY: the kernel writes an int here
  ca.exit_signal = SIGCHLD;
  long pid = ::syscall(SYS_clone3, &ca, sizeof ca);
  if (pid < 0) return Error::fromErrno(ctx + ": clone3");
  if (pid == 0) guestChild(plan);
  GuestProcess g;
  g.pid = static_cast<pid_t>(pid);
  g.pidfd.reset(pidfd);
  ScopeExit reap([&] { killAndReap(g.pidfd); });
  sync.reset();
  theirs.reset();

  if (Status m = writeIdMaps(g.pid); !m.ok()) return std::move(m).error().withContext(ctx);
  char go = kGo;
  if (::send(ours.get(), &go, 1, MSG_NOSIGNAL) != 1) return Error::fromErrno(ctx + ": sync");
  // The listener, then (exec closes the socket) nothing: the agent runs.
  char buf[sizeof(ChildFailure)] = {};
  iovec iov{buf, sizeof buf};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(ours.get(), &msg, MSG_CMSG_CLOEXEC);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      g.listener.reset(fd);
    }
  }
  if (n == 1 && buf[0] == kListener && g.listener) n = ::recv(ours.get(), buf, sizeof buf, 0);
  if (n != 0) {
    ChildFailure f;
    if (n == sizeof f) std::memcpy(&f, buf, sizeof f);
    if (f.kind == kFailed && f.err != 0)
      return Error::fromErrno(ctx + ": " + stepName(f.step), f.err);
    return Error(Code::kInternal, ctx + ": the child ended before exec");
  }
  reap.dismiss();
  return g;
}

asio::awaitable<void> serveGuestCalls(std::shared_ptr<Fd> listener,
                                      std::shared_ptr<GuestCallPolicy> policy) {
  auto ex = co_await asio::this_coro::executor;
  // The kernel's structures may be larger than our headers': ask.
  seccomp_notif_sizes sizes{};
  if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) co_return;
  std::vector<char> req_buf(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)));
  std::vector<char> resp_buf(
      std::max<size_t>(sizes.seccomp_notif_resp, sizeof(seccomp_notif_resp)));
  // SAFETY: both buffers are at least as large as the structures, and char
  // storage from std::vector is suitably aligned for them (operator new).
  auto* req = reinterpret_cast<seccomp_notif*>(req_buf.data());
  auto* resp = reinterpret_cast<seccomp_notif_resp*>(resp_buf.data());
  for (;;) {
    // A new registration each time: epoll reports a descriptor that is
    // ready already when it is added, so no notification is missed.
    int d = ::fcntl(listener->get(), F_DUPFD_CLOEXEC, 0);
    if (d < 0) co_return;
    asio::posix::stream_descriptor sd(ex, d);
    auto [ec] = co_await sd.async_wait(asio::posix::stream_descriptor::wait_read,
                                       asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    for (;;) {
      pollfd p{listener->get(), POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) break;
      if (!(p.revents & POLLIN)) co_return;  // POLLHUP: its last process has exited
      std::fill(req_buf.begin(), req_buf.end(), 0);
      if (::ioctl(listener->get(), SECCOMP_IOCTL_NOTIF_RECV, req) != 0) {
        if (errno == ENOENT || errno == EINTR) continue;  // the caller died or was interrupted
        co_return;
      }
      if (policy->stall) {
        // Never answered: the caller hangs until it is killed.
        ++policy->stalled;
        if (policy->on_stall) asio::post(ex, policy->on_stall);
        continue;
      }
      std::fill(resp_buf.begin(), resp_buf.end(), 0);
      resp->id = req->id;  // val 0, error 0: the call returns 0
      (void)::ioctl(listener->get(), SECCOMP_IOCTL_NOTIF_SEND, resp);  // ENOENT: it died
    }
  }
}

}  // namespace vessel::hypervisor::testing
