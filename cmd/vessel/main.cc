// vessel: the command-line client. Subcommands live in their own files and
// register through commands.h.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>

#include "cmd/vessel/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"vessel: create and use Vessel sandboxes"};
  app.require_subcommand(1);
  // Global, before or after the subcommand (fallthrough): every client
  // reads it from the environment (client::optionsFromEnv).
  app.fallthrough();
  std::string ca_file;
  app.add_option("--ca-file", ca_file,
                 "https:// API and data plane URLs: verify the server against this PEM CA "
                 "certificate instead of the system's trust store")
      ->envname("VESSEL_CA_FILE");
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
  vessel::cli::addLogs(app, &run);
  vessel::cli::addVolume(app, &run);
  CLI11_PARSE(app, argc, argv);
  if (!ca_file.empty()) ::setenv("VESSEL_CA_FILE", ca_file.c_str(), 1);
  return run ? run() : 0;
}
