#pragma once
// envd, E2B's in-sandbox daemon, as the SDKs reach it on port 49983: the
// Connect services process.Process and filesystem.Filesystem, plus GET/POST
// /files and GET /health (docs/e2b-envd.md). Vessel has no daemon in the
// guest for this: every call is mapped here, on the host, onto the sandbox's
// agent (agentclient::AgentClient, from ops::Lifecycle::agentOf).
//
// A request names its sandbox by the `E2b-Sandbox-Id` header, else by a
// `49983-<id>.<domain>` Host, else (signed /files URLs) by its signature,
// and proves access with the sandbox's token (`X-Access-Token`, see
// e2b/access_token.h) or the signature made with it.
//
// Processes outlive the stream that started them: the host keeps each one's
// agent stream attached in a table (process_table.h), fans its output out to
// every Start/Connect stream open on it, and re-attaches after the sandbox's
// agent changed (pause and resume). When the sandbox dies under a stream the
// connection is cut, with no end-of-stream message, as envd's would be.
//
// Used from the io thread only.
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "e2b/access_token.h"
#include "http/server.h"

namespace vessel::agentclient {
class AgentClient;
}

namespace vessel::e2b::envd {

struct Services;

// What envd needs of the lifecycle: a running sandbox's agent (null when it
// is not running here) and the ids of the sandboxes that are (to find the
// one a signed URL was made for).
struct Sandboxes {
  std::function<std::shared_ptr<agentclient::AgentClient>(const std::string&)> agent_of;
  std::function<std::vector<std::string>()> live_ids;
};

class Envd {
 public:
  Envd(boost::asio::io_context& io, Sandboxes sandboxes, const AccessTokens& tokens);
  ~Envd();
  Envd(const Envd&) = delete;
  Envd& operator=(const Envd&) = delete;
  void install(http::HttpServer& server);

 private:
  std::unique_ptr<Services> s_;
};

}  // namespace vessel::e2b::envd
