#pragma once
// Each `vessel` subcommand registers itself on the CLI11 tree and, when
// chosen, sets the function main() runs. One file per command family.
#include <CLI/CLI.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <functional>
#include <string>

#include "base/result.h"

namespace vessel::cli {

void addDebugBoot(CLI::App& debug, std::function<int()>* run);
void addDebugExec(CLI::App& debug, std::function<int()>* run);
void addTemplate(CLI::App& app, std::function<int()>* run);
void addSandbox(CLI::App& app, std::function<int()>* run);
void addSandboxNetwork(CLI::App& sandbox, std::function<int()>* run);
void addCredential(CLI::App& app, std::function<int()>* run);
// `--network` of create and `sandbox network`: none, full or
// allow:NAME[,NAME...] as the API's Network object.
Result<boost::json::object> networkFlag(const std::string& spec);
void addOps(CLI::App& app, std::function<int()>* run);
void addAdmin(CLI::App& app, std::function<int()>* run);
// The data plane: exec.cc, shell.cc, cp.cc.
void addExec(CLI::App& app, std::function<int()>* run);
void addShell(CLI::App& app, std::function<int()>* run);
void addCp(CLI::App& app, std::function<int()>* run);
void addStatus(CLI::App& app, std::function<int()>* run);
// `vessel volume ...`: volumes and their files (volume.cc).
void addVolume(CLI::App& app, std::function<int()>* run);
// `vessel logs ID`: a sandbox's log (logs.cc).
void addLogs(CLI::App& app, std::function<int()>* run);
// Prints /healthz's isolation warning (TCG, no jail) on stderr, if any.
void warnIsolation(const boost::json::value& health);

}  // namespace vessel::cli
