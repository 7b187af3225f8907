#include "os/command.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "base/child_process.h"
#include "base/fd.h"

namespace vessel::os {

Result<CommandOutput> runCommand(const std::vector<std::string>& argv, std::string_view input,
                                 std::chrono::milliseconds timeout,
                                 const std::vector<std::string>& env) {
  std::string what = argv.empty() ? "" : argv[0];
  for (size_t i = 1; i < argv.size() && i < 6; ++i) what += " " + argv[i];
  VESSEL_ASSIGN_OR_RETURN(Pipe in, Pipe::create());
  VESSEL_ASSIGN_OR_RETURN(Pipe out, Pipe::create());
  VESSEL_ASSIGN_OR_RETURN(Pipe err, Pipe::create());
  // Rulesets are small; more than a pipe's capacity would need a writer thread.
  if (input.size() > 60000) return Error(Code::kInvalidArgument, what + ": input too large");
  VESSEL_ASSIGN_OR_RETURN(
      ChildProcess child,
      ChildProcess::spawn({.argv = argv,
                           .env = env,
                           .fds = {{in.read.get(), 0}, {out.write.get(), 1}, {err.write.get(), 2}},
                           .die_with_parent = true}));
  in.read.reset();
  out.write.reset();
  err.write.reset();
  if (!input.empty() &&
      ::write(in.write.get(), input.data(), input.size()) != static_cast<ssize_t>(input.size())) {
    return Error::fromErrno(what + ": write stdin");
  }
  in.write.reset();
  CommandOutput result;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out.read.get(), POLLIN, 0}, {err.read.get(), POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Error(Code::kDeadlineExceeded, what + ": timed out");
    int r = ::poll(fds, 2, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Error::fromErrno(what + ": poll");
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::string& dst = i == 0 ? result.out : result.err;
      if (dst.size() < (1 << 20)) dst.append(buf, static_cast<size_t>(n));
    }
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  VESSEL_ASSIGN_OR_RETURN(ExitStatus st,
                          child.waitFor(std::max(left, std::chrono::milliseconds(1))));
  if (!st.success()) {
    std::string msg = result.err.substr(0, 2000);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return Error(Code::kInternal, what + ": " + st.describe() + ": " + msg);
  }
  return result;
}

}  // namespace vessel::os
