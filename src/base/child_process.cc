#include "base/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
// glibc 2.36 ships sys/pidfd.h without C++ linkage guards.
extern "C" {
#include <sys/pidfd.h>
}
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/exec_child.h"

namespace vessel {

std::string ExitStatus::describe() const {
  if (unknown) return "ended (exit status unknown: not our child)";
  if (exited) return "exit code " + std::to_string(code);
  return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
}

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this != &o) {
    killAndReap();
    pid_ = std::exchange(o.pid_, -1);
    adopted_ = std::exchange(o.adopted_, false);
    pidfd_ = std::move(o.pidfd_);
    status_ = std::move(o.status_);
  }
  return *this;
}

ChildProcess::~ChildProcess() { killAndReap(); }

void ChildProcess::killAndReap() {
  // A moved-from object keeps its pid but not its pidfd: nothing to do.
  if (pid_ <= 0 || status_ || pidfd_.get() < 0) return;
  ::pidfd_send_signal(pidfd_.get(), SIGKILL, nullptr, 0);
  if (adopted_) {
    // Not ours to reap: wait (bounded) until it is gone.
    pollfd p{pidfd_.get(), POLLIN, 0};
    ::poll(&p, 1, 5000);
    status_ = ExitStatus{false, 0, SIGKILL};
    return;
  }
  siginfo_t info{};
  while (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED) != 0 &&
         errno == EINTR) {
  }
  status_ = ExitStatus{false, 0, SIGKILL};
}

namespace {

// Only async-signal-safe calls between fork and exec.
[[noreturn]] void childExec(const SpawnOptions& opts, char* const* argv, char* const* envp,
                            int err_fd) {
  if (opts.die_with_parent) ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (opts.new_session) ::setsid();
  resetSignalsForExec();
  if (opts.pre_exec) {
    if (int e = opts.pre_exec(); e != 0) {
      (void)!::write(err_fd, &e, sizeof e);
      ::_exit(127);
    }
  }

  // Move every source fd above all targets first, so a mapping never
  // overwrites a source another mapping still needs.
  int max_target = 2;
  for (auto& [src, dst] : opts.fds) max_target = std::max(max_target, dst);
  int tmp[64];
  size_t n = std::min<size_t>(opts.fds.size(), 64);
  for (size_t i = 0; i < n; ++i) {
    tmp[i] = ::fcntl(opts.fds[i].first, F_DUPFD_CLOEXEC, max_target + 1 + 64);
    if (tmp[i] < 0) goto fail;
  }
  {
    bool mapped[3] = {false, false, false};
    for (size_t i = 0; i < n; ++i) {
      if (::dup2(tmp[i], opts.fds[i].second) < 0) goto fail;  // dup2 clears CLOEXEC
      if (opts.fds[i].second <= 2) mapped[opts.fds[i].second] = true;
    }
    int devnull = ::open("/dev/null", O_RDWR);
    for (int t = 0; t <= 2; ++t)
      if (!mapped[t] && devnull >= 0) ::dup2(devnull, t);
    // Keep err_fd (CLOEXEC, above max_target) until exec closes it.
    ::close_range(static_cast<unsigned>(max_target + 1), static_cast<unsigned>(err_fd - 1), 0);
    ::close_range(static_cast<unsigned>(err_fd + 1), ~0U, 0);
  }
  if (opts.env.empty())
    ::execvp(argv[0], argv);
  else
    ::execvpe(argv[0], argv, envp);
fail:
  int e = errno;
  (void)!::write(err_fd, &e, sizeof e);
  ::_exit(127);
}

}  // namespace

Result<ChildProcess> ChildProcess::spawn(const SpawnOptions& opts) {
  if (opts.argv.empty()) return Error(Code::kInvalidArgument, "spawn: empty argv");
  if (opts.fds.size() > 64) return Error(Code::kInvalidArgument, "spawn: more than 64 fds");
  std::vector<char*> argv, envp;
  for (auto& a : opts.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : opts.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // The exec-error pipe sits on a high fd so the child's fd shuffling
  // cannot clobber it.
  VESSEL_ASSIGN_OR_RETURN(Pipe errp, Pipe::create());
  int high = ::fcntl(errp.write.get(), F_DUPFD_CLOEXEC, 900);
  if (high < 0) return Error::fromErrno("spawn " + opts.argv[0] + ": dup");
  Fd err_w(high);
  errp.write.reset();

  pid_t pid = ::fork();
  if (pid < 0) return Error::fromErrno("spawn " + opts.argv[0] + ": fork");
  if (pid == 0) childExec(opts, argv.data(), envp.data(), err_w.get());
  err_w.reset();

  ChildProcess child;
  child.pid_ = pid;
  // Safe from pid reuse: the child is ours and is not reaped before this.
  int pfd = ::pidfd_open(pid, 0);
  if (pfd < 0) {
    int e = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    child.pid_ = -1;
    return Error::fromErrno("spawn " + opts.argv[0] + ": pidfd_open", e);
  }
  child.pidfd_.reset(pfd);

  int child_errno = 0;
  ssize_t r;
  do {
    r = ::read(errp.read.get(), &child_errno, sizeof child_errno);
  } while (r < 0 && errno == EINTR);
  if (r == sizeof child_errno) {
    child.tryWait();
    child.waitFor(std::chrono::milliseconds(1000));
    return Error::fromErrno("spawn " + opts.argv[0] + ": exec", child_errno);
  }
  return child;
}

Result<ChildProcess> ChildProcess::adopt(pid_t pid, uint64_t start_ticks) {
  std::string ctx = "adopt pid " + std::to_string(pid);
  if (pid <= 1) return Error(Code::kInvalidArgument, ctx + ": bad pid");
  int pfd = ::pidfd_open(pid, 0);
  if (pfd < 0) {
    if (errno == ESRCH) return Error(Code::kNotFound, ctx + ": no such process");
    return Error::fromErrno(ctx + ": pidfd_open");
  }
  ChildProcess p;
  p.pid_ = pid;
  p.adopted_ = true;
  p.pidfd_.reset(pfd);
  // Checked after the pidfd is open: from here on the pid cannot be reused
  // by another process while the pidfd's process lives.
  if (start_ticks != 0) {
    auto st = processStartTicks(pid);
    if (!st.ok() || *st != start_ticks) {
      p.pid_ = -1;  // not ours in any sense: never signal it
      return Error(Code::kNotFound, ctx + ": the process with that pid is another one (started " +
                                        (st.ok() ? std::to_string(*st) : "?") + ", expected " +
                                        std::to_string(start_ticks) + ")");
    }
  }
  if (p.tryWait()) {
    p.pid_ = -1;
    return Error(Code::kNotFound, ctx + ": the process has ended");
  }
  return p;
}

Result<uint64_t> processStartTicks(pid_t pid) {
  auto text = readFile("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!text.ok()) return std::move(text).error();
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
  // fields are counted after the last ')'.
  auto rp = text->rfind(')');
  if (rp == std::string::npos) return Error(Code::kInternal, "/proc stat of pid: no comm");
  size_t pos = rp + 2;
  for (int field = 3; field < 22; ++field) {
    pos = text->find(' ', pos);
    if (pos == std::string::npos) return Error(Code::kInternal, "/proc stat: too few fields");
    ++pos;
  }
  uint64_t v = 0;
  for (; pos < text->size() && (*text)[pos] >= '0' && (*text)[pos] <= '9'; ++pos)
    v = v * 10 + static_cast<uint64_t>((*text)[pos] - '0');
  return v;
}

Result<std::string> processCmdline(pid_t pid) {
  auto text = readFile("/proc/" + std::to_string(pid) + "/cmdline", 1 << 20);
  if (!text.ok()) return std::move(text).error();
  for (char& c : *text)
    if (c == '\0') c = ' ';
  return *text;
}

Status ChildProcess::signal(int sig) {
  if (pid_ <= 0 || status_) return Error(Code::kFailedPrecondition, "signal: process has exited");
  if (::pidfd_send_signal(pidfd_.get(), sig, nullptr, 0) != 0)
    return Error::fromErrno("signal pid " + std::to_string(pid_));
  return okStatus();
}

std::optional<ExitStatus> ChildProcess::tryWait() {
  if (status_ || pid_ <= 0) return status_;
  if (adopted_) {
    // A pidfd becomes readable when its process ends, child or not.
    pollfd p{pidfd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return std::nullopt;
    ExitStatus st;
    st.unknown = true;
    status_ = st;
    return status_;
  }
  siginfo_t info{};
  if (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED | WNOHANG) != 0)
    return std::nullopt;
  if (info.si_pid == 0) return std::nullopt;
  ExitStatus st;
  if (info.si_code == CLD_EXITED) {
    st.exited = true;
    st.code = info.si_status;
  } else {
    st.signal = info.si_status;
  }
  status_ = st;
  return status_;
}

Result<ExitStatus> ChildProcess::waitFor(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return Error(Code::kFailedPrecondition, "wait: no process");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto st = tryWait()) return *st;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return Error(Code::kDeadlineExceeded, "wait pid " + std::to_string(pid_) +
                                                ": still running after " +
                                                std::to_string(timeout.count()) + " ms");
    pollfd p{pidfd_.get(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
}

ExitStatus ChildProcess::terminate(std::chrono::milliseconds grace) {
  if (auto st = tryWait()) return *st;
  (void)signal(SIGTERM);
  if (auto st = waitFor(grace); st.ok()) return *st;
  killAndReap();
  return *status_;
}

}  // namespace vessel
