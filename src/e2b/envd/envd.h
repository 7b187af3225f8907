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
#include <chrono>
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
  // The tenant owning a sandbox, for the per-tenant caps (asked once per
  // sandbox that gets watchers or processes); unset or "": the sandbox
  // counts as its own tenant.
  std::function<std::string(const std::string&)> tenant_of;
};

// envd's bounds. What envd keeps for a sandbox between requests (polled watchers and their
// queued events, the processes it started or reconnected to) is capped per
// sandbox and per tenant, and freed when the sandbox ends: at once when the
// lifecycle says so (Envd::sandboxEnded), else once the sandbox has not been
// running for `keep_detached` (a pause keeps it that long, for the resume).
struct EnvdLimits {
  size_t watchers_per_sandbox = 64;
  size_t watchers_per_tenant = 256;
  // Events a watcher holds until fetched: the oldest go first past either.
  size_t watcher_events = 4096;
  size_t watcher_bytes = 256 << 10;
  size_t processes_per_sandbox = 1024;
  size_t processes_per_tenant = 4096;
  std::chrono::milliseconds keep_detached = std::chrono::minutes(10);
  std::chrono::milliseconds sweep_interval = std::chrono::seconds(30);
  // gzip-encoded uploads: inflated off the io thread, this many at once
  // (more wait their turn), an octet-stream one streamed into the file up
  // to `max_inflated` bytes, a multipart one (parsed whole) up to
  // `max_inflated_multipart`.
  size_t inflating_uploads = 2;
  uint64_t max_inflated = 1ull << 30;
  size_t max_inflated_multipart = 64u << 20;
};

// How much envd holds now (tests, metrics).
struct StateUsage {
  size_t sandboxes = 0;  // with any state
  size_t watchers = 0;
  size_t queued_events = 0;
  size_t queued_bytes = 0;
  size_t processes = 0;
};

class Envd {
 public:
  Envd(boost::asio::io_context& io, Sandboxes sandboxes, const AccessTokens& tokens,
       EnvdLimits limits = {});
  ~Envd();
  Envd(const Envd&) = delete;
  Envd& operator=(const Envd&) = delete;
  void install(http::HttpServer& server);

  // The sandbox is gone (deleting, deleted, failed): its watchers, queued
  // events and process entries are freed now.
  void sandboxEnded(const std::string& id);
  StateUsage usage() const;

 private:
  std::unique_ptr<Services> s_;
};

}  // namespace vessel::e2b::envd
