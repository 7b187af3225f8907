#pragma once
// The steps of a Dockerfile's build (templates::BuildStep), run in the
// build VM through its agent: RUN as its user in its directory with its
// environment, COPY's files and directories with their modes and owners
// (names looked up in the guest's own /etc/passwd and /etc/group), ADD's
// archives unpacked by the guest's tar. A failing step names its line, its
// exit code and the last lines of its output; RUN's output is logged as it
// comes (BuildLog).
#include <boost/asio/awaitable.hpp>
#include <vector>

#include "agentclient/agent_client.h"
#include "node/template_builder.h"
#include "templates/build_spec.h"

namespace vessel::node {

namespace asio = boost::asio;

// `log` may be empty.
asio::awaitable<Status> runBuildSteps(agentclient::AgentClient& a,
                                      const std::vector<templates::BuildStep>& steps,
                                      const Progress& progress, const BuildLog& log,
                                      Clock::time_point deadline);

// The last `lines` lines of a command's output, for an error.
std::string tailLines(std::string_view out, size_t lines);

}  // namespace vessel::node
