#pragma once
// The data plane (api/openapi.yaml, "Data plane"): its own listener, which
// accepts only session tokens (api/sessions.h) and maps requests onto the
// agent of the token's sandbox: exec streamed as Server-Sent Events, stdin,
// signals and pty resize by process id, file download/upload (streamed in
// both directions, never a whole file in memory), list, stat, mkdir, move,
// remove, and directory watches as SSE.
//
// Used from the io thread only, like the control plane.
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "api/http_names.h"
#include "api/live_sandboxes.h"
#include "api/sessions.h"
#include "http/render_thread.h"
#include "http/server.h"

namespace vessel::api {

struct DataPlaneLimits {
  uint64_t max_upload_bytes = uint64_t{4} << 30;
  size_t max_stdin_bytes = 1 << 20;  // per request; the server's body limit
};

class DataPlane {
 public:
  DataPlane(asio::io_context& io, Sessions& sessions, LiveSandboxes& live,
            DataPlaneLimits limits = {});
  ~DataPlane();
  // The server should have max_body_bytes >= limits.max_stdin_bytes.
  void install(HttpServer& server);

 private:
  struct Target {
    std::string sandbox_id;
    std::shared_ptr<agentclient::AgentClient> agent;
    std::string session_id;  // Sessions::Bound::session_id, for the command log
  };
  // The session's sandbox and its agent, or the response refusing the request.
  Result<Target> bind(const Request& req, Response* refusal);

  asio::awaitable<std::optional<Response>> exec(const Request& req,
                                                boost::beast::tcp_stream& stream, Target t);
  asio::awaitable<Response> process(const Request& req, Target t, std::string pid_seg,
                                    std::string action);
  asio::awaitable<Response> listProcesses(const Request& req, Target t);
  asio::awaitable<std::optional<Response>> download(const Request& req,
                                                    boost::beast::tcp_stream& stream, Target t);
  asio::awaitable<Response> upload(const Request& req, BodyReader& body);
  asio::awaitable<Response> removeFile(const Request& req, Target t);
  asio::awaitable<Response> listFiles(const Request& req, Target t);
  asio::awaitable<Response> statFile(const Request& req, Target t);
  asio::awaitable<Response> mkdir(const Request& req, Target t);
  asio::awaitable<Response> move(const Request& req, Target t);
  asio::awaitable<std::optional<Response>> watch(const Request& req,
                                                 boost::beast::tcp_stream& stream, Target t);

  asio::io_context& io_;
  Sessions& sessions_;
  LiveSandboxes& live_;
  DataPlaneLimits limits_;
  // Processes whose exec stream is open on this data plane, by (sandbox, pid):
  // their stdin is written through these handles.
  std::map<std::pair<std::string, uint32_t>, std::shared_ptr<agentclient::Process>> attached_;
  // Listings' JSON is made here, not on the io thread. Declared last:
  // joined first.
  RenderThread render_;
};

}  // namespace vessel::api
