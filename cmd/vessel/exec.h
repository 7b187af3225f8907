#pragma once
// `vessel exec` as a function, so that `vessel shell` is exec with a pty.
#include <string>
#include <vector>

namespace vessel::cli {

struct ExecOptions {
  std::string sandbox_id;
  std::vector<std::string> argv;  // or
  std::string shell;              // a command for /bin/sh -c
  bool interactive = false;       // pass our stdin through
  bool tty = false;               // a pty, our terminal raw, resized on SIGWINCH
  std::string user;               // "": the template's unprivileged user
  std::string cwd;
  std::vector<std::string> env;  // KEY=VALUE
};

// Runs the command, streams its output to ours and returns its exit code
// (128+N when killed by signal N), or 125/126/127 when vessel could not run it.
int runExec(const ExecOptions& o);

}  // namespace vessel::cli
