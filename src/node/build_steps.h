#pragma once
// The steps of a Dockerfile's build (templates::BuildStep), run in the
// build VM through its agent: RUN as its user in its directory with its
// environment, COPY's files and directories with their modes and owners
// (names looked up in the guest's own /etc/passwd and /etc/group), ADD's
// archives unpacked by the guest's tar. A failing step names its line, its
// exit code and the last lines of its output; RUN's output is logged as it
// comes (BuildLog).
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <vector>

#include "agentclient/agent_client.h"
#include "node/template_builder.h"
#include "templates/build_spec.h"

namespace vessel::node {

namespace asio = boost::asio;

// The steps of one Dockerfile instruction: [begin, end) of the build's
// steps (a COPY of a directory is a step per file). The unit that is
// logged, timed and cached.
struct InstructionRange {
  size_t begin = 0, end = 0;
};
std::vector<InstructionRange> instructionRanges(const std::vector<templates::BuildStep>& steps);

// How much of the steps to run. `skip` instructions are already done (the
// build booted a cached disk that holds them): they are logged as cached,
// not run. `checkpoint`, when set, is awaited after each instruction that
// ran (its index), so the builder can keep the disk as it stands; an error
// from it ends the build.
struct StepRun {
  size_t skip = 0;
  std::function<asio::awaitable<Status>(size_t instruction)> checkpoint;
};

// `log` may be empty.
asio::awaitable<Status> runBuildSteps(agentclient::AgentClient& a,
                                      const std::vector<templates::BuildStep>& steps,
                                      const Progress& progress, const BuildLog& log,
                                      Clock::time_point deadline, const StepRun& run = {});

// The last `lines` lines of a command's output, for an error.
std::string tailLines(std::string_view out, size_t lines);

}  // namespace vessel::node
