#pragma once
// The process behind a fake VM (fake_hypervisor.h): vessel-agent spawned in
// its own user, PID, UTS, mount and IPC namespaces (its PID namespace's
// init, so everything it starts dies with it), with a seccomp filter that
// hands its clock and entropy calls to us (SECCOMP_RET_USER_NOTIF) instead
// of letting them reach the host. serveGuestCalls answers them with
// success without running them, or holds them while a test stalls guests.
#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <string>

#include "base/child_process.h"
#include "base/fd.h"
#include "base/result.h"

namespace vessel::hypervisor::testing {

struct GuestProcess {
  pid_t pid = -1;  // in our PID namespace
  Fd pidfd;
  Fd listener;  // the seccomp notification fd
};

struct GuestSpawn {
  std::string agent_binary;
  std::string passwd;   // the agent's --passwd
  int channel_fd = -1;  // becomes the agent's fd 3
  int stderr_fd = -1;   // the agent's stderr (the VM's console log)
};

// Spawns the agent; on error nothing is left running.
Result<GuestProcess> spawnGuest(const GuestSpawn& s);

// The uid the guest's "user" account has (1000 when we may map a range of
// ids into its namespace, i.e. as root; else 0, the one id we may map).
unsigned guestUserId();

// SIGKILLs (if still running) and reaps; the exit status.
ExitStatus killAndReap(const Fd& pidfd);
// Reaps if it has exited; nullopt while it runs.
std::optional<ExitStatus> tryReap(const Fd& pidfd);

// Shared between a hypervisor and the coroutines serving its guests.
struct GuestCallPolicy {
  bool stall = false;
  std::function<void()> on_stall;
  size_t stalled = 0;
};

// Answers the guest's notified calls until its last process has exited.
boost::asio::awaitable<void> serveGuestCalls(std::shared_ptr<Fd> listener,
                                             std::shared_ptr<GuestCallPolicy> policy);

}  // namespace vessel::hypervisor::testing
