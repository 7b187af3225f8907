#pragma once
// ChildProcess: a spawned program owned through a pidfd. Signals go through
// the pidfd (no pid-reuse races), exit is observed by polling it, and the
// destructor kills (SIGKILL) and reaps a child that is still running, so no
// early return can leak a QEMU process.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

namespace vessel {

struct ExitStatus {
  bool exited = false;  // true: exit code valid; false: killed by `signal`
  int code = 0;
  int signal = 0;
  bool unknown = false;  // ended, but not our child: how is not known
  bool success() const { return exited && code == 0; }
  std::string describe() const;  // "exit code 1" / "killed by signal 9 (Killed)"
};

struct SpawnOptions {
  std::vector<std::string> argv;
  // Entire environment of the child; empty means inherit the parent's.
  std::vector<std::string> env;
  // Parent fd -> child fd number. Every other fd above 2 is closed in the
  // child. Child fds 0, 1 and 2 default to /dev/null unless mapped here.
  std::vector<std::pair<int, int>> fds;
  // Put the child in its own session so a terminal's ^C does not reach it.
  bool new_session = true;
  // Deliver SIGKILL to the child if the spawning thread dies (tests, probes).
  bool die_with_parent = false;
  // Runs in the child after fork, before the fds are mapped and exec: 0 to
  // go on, or an errno that spawn() returns as the error. It runs in a copy
  // of a multithreaded process, so it may only make async-signal-safe calls
  // on data prepared before spawn() (the jail: namespaces, mounts, ids).
  std::function<int()> pre_exec;
};

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(ChildProcess&&) noexcept = default;
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  // Starts argv[0] (looked up in PATH if it has no '/'). An exec failure in
  // the child comes back here as an Error, not as a child that exits 127.
  static Result<ChildProcess> spawn(const SpawnOptions& opts);
  // Takes over a process this one did not spawn (a QEMU left running by an
  // earlier vesseld). It is watched and signalled through a pidfd like a
  // child, but it is not ours to reap (init is its parent now), so its exit
  // status is unknown: status() reports it as ExitStatus::unknown().
  // `start_ticks`, when not 0, must match /proc/<pid>/stat's start time, so
  // a recycled pid is refused.
  static Result<ChildProcess> adopt(pid_t pid, uint64_t start_ticks);

  pid_t pid() const { return pid_; }
  // Readable once the child has exited; for event loops.
  int pidfd() const { return pidfd_.get(); }
  bool running() const { return pid_ > 0 && !status_; }

  // Lets go of the process without killing it (it outlives this object and
  // this program, e.g. a QEMU left for the next vesseld).
  void release() {
    pid_ = -1;
    pidfd_.reset();
  }
  Status signal(int sig);
  // Non-blocking: the exit status if the child has ended (and reaps it).
  std::optional<ExitStatus> tryWait();
  // Waits up to `timeout` for the child to exit.
  Result<ExitStatus> waitFor(std::chrono::milliseconds timeout);
  // SIGTERM, wait up to `grace`, then SIGKILL and reap.
  ExitStatus terminate(std::chrono::milliseconds grace);
  // Last known status (after tryWait/waitFor succeeded).
  const std::optional<ExitStatus>& status() const { return status_; }

 private:
  void killAndReap();
  pid_t pid_ = -1;
  bool adopted_ = false;
  Fd pidfd_;
  std::optional<ExitStatus> status_;
};

// A process's start time in clock ticks after boot (/proc/<pid>/stat field
// 22): with the pid, it names one process for the life of the machine.
Result<uint64_t> processStartTicks(pid_t pid);
// Its command line, arguments joined by spaces.
Result<std::string> processCmdline(pid_t pid);

}  // namespace vessel
