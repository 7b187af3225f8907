// vessel-agent: PID 1 inside every sandbox (docs/agent-protocol.md). As PID 1
// it mounts the basic filesystems, opens the virtio-serial port named
// vessel.agent, announces itself with Hello and serves the host forever.
// `vessel-agent --channel-fd N` runs it on the host over an inherited
// connected socket, for tests that need no VM.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "agent/agent.h"
#include "agent/pid1.h"

namespace {

[[noreturn]] void idleForever() {
  // PID 1 must never exit (the kernel would panic): reap and wait.
  for (;;) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    ::sleep(1);
  }
}

int usage() {
  std::fprintf(stderr, "usage: vessel-agent [--channel-fd N] [--passwd FILE]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool pid1 = ::getpid() == 1;
  int channel_fd = -1;
  vessel::agent::AgentOptions opts;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--channel-fd" && i + 1 < argc) {
      channel_fd = std::atoi(argv[++i]);
    } else if (a == "--passwd" && i + 1 < argc) {
      opts.passwd = argv[++i];
    } else if (!pid1) {
      return usage();
    }
    // As PID 1 unknown arguments come from the kernel command line: ignore.
  }
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sigfd = ::signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);

  if (channel_fd >= 0) {
    // Host-run: orphans of our processes come to us, and we die with the test.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::fcntl(channel_fd, F_SETFD, FD_CLOEXEC);
    opts.exit_on_eof = true;
  } else {
    if (!pid1) return usage();
    vessel::agent::mountBasics();
    std::string port;
    for (int i = 0; i < 1000 && (port = vessel::agent::findPort("vessel.agent")).empty(); ++i)
      ::usleep(10000);
    if (!port.empty()) channel_fd = ::open(port.c_str(), O_RDWR | O_CLOEXEC);
    if (channel_fd < 0) {
      std::fprintf(stderr, "vessel-agent: cannot open agent port '%s': %s\n", port.c_str(),
                   std::strerror(errno));
      idleForever();
    }
  }
  ::fcntl(channel_fd, F_SETFL, ::fcntl(channel_fd, F_GETFL) | O_NONBLOCK);
  if (sigfd < 0) {
    std::fprintf(stderr, "vessel-agent: signalfd: %s\n", std::strerror(errno));
    if (pid1) idleForever();
    return 1;
  }
  for (;;) {
    try {
      vessel::agent::Agent agent(channel_fd, sigfd, opts);
      agent.run();
      if (opts.exit_on_eof) return 0;
    } catch (const std::exception& e) {
      // Out of memory or a bug: PID 1 logs and carries on with a fresh agent.
      std::fprintf(stderr, "vessel-agent: %s\n", e.what());
      if (!pid1) return 1;
      // The Agent destructor closed the fd; reopen the port.
      std::string port = vessel::agent::findPort("vessel.agent");
      channel_fd = port.empty() ? -1 : ::open(port.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
      if (channel_fd < 0) idleForever();
    }
  }
}
