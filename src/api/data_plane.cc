// The data plane's route table and its sessions; the routes are in
// data_plane_exec.cc (processes) and data_plane_files.cc (files).
#include "api/data_plane.h"

#include "api/data_plane_requests.h"
#include "api/data_plane_stream.h"

namespace vessel::api {

using namespace data_plane;  // NOLINT(google-build-using-namespace): the plane's own helpers

DataPlane::DataPlane(asio::io_context& io, Sessions& sessions, LiveSandboxes& live,
                     DataPlaneLimits limits)
    : io_(io), sessions_(sessions), live_(live), limits_(limits) {}

DataPlane::~DataPlane() = default;

// Every route binds the request's session to its sandbox's agent first;
// the router's own 404 and 405 come after the same check (the guard), as
// they did before the route table.
void DataPlane::install(HttpServer& server) {
  Router& r = server.router();
  r.paramType("pid", [](std::string_view v) -> Status {
    auto pid = parsePid(std::string(v));
    if (!pid.ok()) return fromGuest(pid.error());
    return okStatus();
  });
  r.guardUnder("/v1/", [this](const Request& req) -> std::optional<Response> {
    Response refusal;
    if (auto t = bind(req, &refusal); !t.ok()) return refusal;
    return std::nullopt;
  });
  using Bound = std::function<asio::awaitable<Response>(const Request&, const Params&, Target)>;
  auto bound = [this](Bound h) -> RouteHandler {
    return
        [this, h = std::move(h)](const Request& req, const Params& p) -> asio::awaitable<Response> {
          Response refusal;
          auto t = bind(req, &refusal);
          if (!t.ok()) co_return refusal;
          co_return co_await h(req, p, std::move(*t));
        };
  };
  using Streaming = std::function<asio::awaitable<std::optional<Response>>(
      const Request&, beast::tcp_stream&, Target)>;
  auto streaming = [this](Streaming h) -> StreamRouteHandler {
    return [this, h = std::move(h)](
               const Request& req, const Params&,
               beast::tcp_stream& stream) -> asio::awaitable<std::optional<Response>> {
      Response refusal;
      auto t = bind(req, &refusal);
      if (!t.ok()) co_return refusal;
      co_return co_await h(req, stream, std::move(*t));
    };
  };
  using P = const Params&;
  r.addStream(http::verb::post, "/v1/exec",
              streaming([this](const Request& q, beast::tcp_stream& s, Target t) {
                return exec(q, s, std::move(t));
              }));
  r.get("/v1/processes",
        bound([this](const Request& q, P, Target t) { return listProcesses(q, std::move(t)); }));
  for (const char* action : {"stdin", "close-stdin", "signal", "resize"}) {
    std::string a = action;
    r.post("/v1/processes/{pid:pid}/" + a, bound([this, a](const Request& q, P p, Target t) {
             return process(q, std::move(t), p["pid"], a);
           }));
  }
  r.addStream(http::verb::get, "/v1/files",
              streaming([this](const Request& q, beast::tcp_stream& s, Target t) {
                return download(q, s, std::move(t));
              }));
  r.addUpload(http::verb::put, "/v1/files", limits_.max_upload_bytes,
              [this](const Request& q, P, BodyReader& body) { return upload(q, body); });
  r.del("/v1/files",
        bound([this](const Request& q, P, Target t) { return removeFile(q, std::move(t)); }));
  r.get("/v1/files/list",
        bound([this](const Request& q, P, Target t) { return listFiles(q, std::move(t)); }));
  r.get("/v1/files/stat",
        bound([this](const Request& q, P, Target t) { return statFile(q, std::move(t)); }));
  r.addStream(http::verb::get, "/v1/files/watch",
              streaming([this](const Request& q, beast::tcp_stream& s, Target t) {
                return watch(q, s, std::move(t));
              }));
  r.post("/v1/files/mkdir",
         bound([this](const Request& q, P, Target t) { return mkdir(q, std::move(t)); }));
  r.post("/v1/files/move",
         bound([this](const Request& q, P, Target t) { return move(q, std::move(t)); }));
}

Result<DataPlane::Target> DataPlane::bind(const Request& req, Response* refusal) {
  std::string state;
  auto s = sessions_.authenticate(req, &state);
  if (!s.ok()) {
    *refusal = refuse(req, s.error(), state);
    return std::move(s).error();
  }
  auto agent = live_.agentOf(s->sandbox_id);
  if (!agent || agent->failure()) {
    Error e(Code::kUnavailable, "sandbox " + s->sandbox_id + " has no running VM on this node");
    *refusal = refuse(req, e);
    return e;
  }
  return Target{s->sandbox_id, std::move(agent), s->session_id};
}

}  // namespace vessel::api
