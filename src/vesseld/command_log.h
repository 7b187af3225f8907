#pragma once
// The command log: every command a front end runs in a sandbox (the native
// data plane's exec, E2B envd's process Start) reaches the guest through
// one AgentClient::exec, which tells its CommandObserver; this one writes
// each as two entries of kind "command" of the sandbox's log
// (ops/sandbox_log.h): "start" and, once its exit is read, "exit". The
// same observer hears the front ends' file operations (kind "file") and
// the connections relayed to the sandbox's ports (kind "port").
// What an entry holds, and what it never does (environment values, input,
// output, tokens), is in docs/logs.md.
#include <memory>
#include <string>

#include "agentclient/agent_client.h"
#include "ops/sandbox_log.h"

namespace vessel::vesseld {

// The bounds of a command line in an entry: arguments, and bytes of all
// of them together (a longer one is cut, and says so).
constexpr size_t kMaxLoggedArgs = 64;
constexpr size_t kMaxLoggedCommandBytes = 4096;

// The observer of one sandbox's agent client, writing to `log` while it
// lives (its handle()).
std::shared_ptr<agentclient::CommandObserver> commandLog(const ops::SandboxLog& log,
                                                         std::string sandbox_id);

}  // namespace vessel::vesseld
