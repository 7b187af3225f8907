// vessel shell [--user NAME] ID: an interactive login shell on a pty.
#include "cmd/vessel/commands.h"
#include "cmd/vessel/exec.h"

namespace vessel::cli {

void addShell(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<ExecOptions>();
  auto* cmd = app.add_subcommand("shell", "an interactive shell in a sandbox");
  cmd->add_option("--user", o->user, "user to log in as (default: the template's user)");
  cmd->add_option("id", o->sandbox_id, "sandbox id")->required();
  cmd->callback([o, run] {
    o->interactive = true;
    o->tty = true;
    // bash where the template has it (debian), busybox sh otherwise (minimal).
    o->shell = "if [ -x /bin/bash ]; then exec /bin/bash -l; else exec /bin/sh -l; fi";
    *run = [o] { return runExec(*o); };
  });
}

}  // namespace vessel::cli
