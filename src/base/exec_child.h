#pragma once
// Between fork and exec, for every child vessel starts (base/child_process.cc
// and the fake hypervisor's guests): async-signal-safe calls only.
#include <signal.h>

namespace vessel {

// Default dispositions and an empty signal mask: the parent may ignore
// SIGPIPE or block signals, and a child would keep both across exec.
inline void resetSignalsForExec() {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) ::sigaction(s, &sa, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

}  // namespace vessel
