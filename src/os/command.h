#pragma once
// Running the system's network tools (ip, nft) as bounded child processes.
// Their stderr becomes the Error context, so "nft: syntax error ..." reaches
// whoever has to fix it.
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace vessel::os {

struct CommandOutput {
  std::string out;
  std::string err;
};

// Runs argv with `input` on stdin; fails unless it exits 0 within `timeout`.
// `env`: the child's entire environment; empty inherits this process's.
Result<CommandOutput> runCommand(const std::vector<std::string>& argv, std::string_view input = {},
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                 const std::vector<std::string>& env = {});

}  // namespace vessel::os
