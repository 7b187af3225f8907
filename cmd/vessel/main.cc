// vessel: the command-line client. Subcommands live in their own files and
// register through commands.h.
#include <CLI/CLI.hpp>

#include "cmd/vessel/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"vessel: create and use Vessel sandboxes"};
  app.require_subcommand(1);
  std::function<int()> run;
  auto* debug = app.add_subcommand("debug", "developer tools that run VMs directly");
  debug->require_subcommand(1);
  vessel::cli::addDebugBoot(*debug, &run);
  vessel::cli::addDebugExec(*debug, &run);
  vessel::cli::addSandbox(app, &run);
  vessel::cli::addOps(app, &run);
  vessel::cli::addTemplate(app, &run);
  vessel::cli::addAdmin(app, &run);
  vessel::cli::addExec(app, &run);
  vessel::cli::addShell(app, &run);
  vessel::cli::addCp(app, &run);
  vessel::cli::addCredential(app, &run);
  vessel::cli::addStatus(app, &run);
  CLI11_PARSE(app, argc, argv);
  return run ? run() : 0;
}
