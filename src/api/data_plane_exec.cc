// The data plane's processes: exec streamed as SSE, stdin, signals, resize, list.
#include <csignal>

#include "api/data_plane.h"
#include "api/data_plane_requests.h"
#include "api/data_plane_stream.h"
#include "base/base64.h"
#include "base/scope_exit.h"

namespace vessel::api {

using namespace data_plane;  // NOLINT(google-build-using-namespace): the plane's own helpers
using namespace std::chrono_literals;

asio::awaitable<std::optional<Response>> DataPlane::exec(const Request& req,
                                                         beast::tcp_stream& stream, Target t) {
  auto in = parseExecRequest(req.body());
  if (!in.ok()) co_return fail(req, in.error());
  in->spec.origin = t.session_id;  // the command log's "who"
  auto started = t.agent->exec(in->spec);
  auto p = co_await std::move(started);
  if (!p.ok()) co_return fail(req, p.error());
  std::shared_ptr<agentclient::Process> proc(std::move(*p));
  uint32_t pid = proc->pid();
  auto lg = log().forSandbox(t.sandbox_id);
  if (!in->keep_stdin) {
    if (auto s = co_await proc->closeStdin(); !s.ok())
      lg.warn("process {}: close stdin: {}", pid, s.error().message());
  }
  auto key = std::make_pair(t.sandbox_id, pid);
  attached_[key] = proc;
  ScopeExit unregister([&] {
    auto it = attached_.find(key);
    if (it != attached_.end() && it->second == proc) attached_.erase(it);
  });

  stream.expires_never();
  bool head_written = co_await writeSseHead(stream, req);
  if (!head_written) {
    (void)co_await t.agent->signal(pid, SIGKILL);
    co_return std::nullopt;
  }
  json::object start{{"pid", pid}};
  std::string first = sseEvent("start", start);
  bool alive = co_await writeAll(stream, std::move(first));

  agentclient::EventStream<agentclient::ProcessEvent> events(io_, proc, kChannelDepth);
  asio::steady_timer keepalive(io_);
  asio::steady_timer never(io_, asio::steady_timer::time_point::max());
  bool exited = false;
  while (alive) {
    auto woke = co_await nextEvent(events, stream, keepalive, never);
    if (woke.woke == Woke::kClientGone) break;
    if (woke.woke != Woke::kNext) {
      std::string ping(kSsePing);
      alive = co_await writeAll(stream, std::move(ping));
      continue;
    }
    const agentclient::StreamItem<agentclient::ProcessEvent>& item = *woke.next;
    std::string msg;
    if (item.error) {
      // The agent went away (or another client attached): say why, then end.
      msg = sseEvent("error", errorJson(*item.error));
      (void)co_await writeAll(stream, std::move(msg));
      exited = true;
      break;
    }
    const agentclient::ProcessEvent& ev = item.value;
    if (ev.kind == agentclient::ProcessEvent::Kind::kExit) {
      msg = sseEvent("exit", exitJson(ev.exit));
      (void)co_await writeAll(stream, std::move(msg));
      exited = true;
      break;
    }
    json::object out{{"data", base64Encode(ev.data)}};
    msg = sseEvent(ev.kind == agentclient::ProcessEvent::Kind::kStdout ? "stdout" : "stderr", out);
    alive = co_await writeAll(stream, std::move(msg));
  }
  if (!exited) {
    // Nobody is left to read it: a command is bound to its stream.
    lg.info("process {}: client went away; killing it", pid);
    auto kill = t.agent->signal(pid, SIGKILL);
    (void)co_await std::move(kill);
  }
  events.stop();
  endStream(stream);
  co_return std::nullopt;
}

asio::awaitable<Response> DataPlane::process(const Request& req, Target t, std::string pid_seg,
                                             std::string action) {
  auto pid = parsePid(pid_seg);
  if (!pid.ok()) co_return fail(req, pid.error());
  if (action == "stdin" || action == "close-stdin") {
    auto it = attached_.find({t.sandbox_id, *pid});
    if (it == attached_.end())
      co_return errorResponse(
          req, Error(Code::kNotFound, "process " + pid_seg + " has no open exec stream"));
    std::shared_ptr<agentclient::Process> p = it->second;  // may leave the map while we wait
    Status s = okStatus();
    if (action == "stdin") {
      std::string_view data = req.body();
      s = co_await p->writeStdin(data);
    } else {
      s = co_await p->closeStdin();
    }
    if (!s.ok()) co_return fail(req, s.error());
    co_return noContent(req);
  }
  if (action == "signal") {
    auto sig = parseSignalRequest(req.body());
    if (!sig.ok()) co_return fail(req, sig.error());
    auto op = t.agent->signal(*pid, *sig);
    Status s = co_await std::move(op);
    if (!s.ok()) co_return fail(req, s.error());
    co_return noContent(req);
  }
  if (action == "resize") {
    auto w = parseResizeRequest(req.body());
    if (!w.ok()) co_return fail(req, w.error());
    auto op = t.agent->resize(*pid, w->rows, w->cols);
    Status s = co_await std::move(op);
    if (!s.ok()) co_return fail(req, s.error());
    co_return noContent(req);
  }
  co_return fail(req, Error(Code::kNotFound, "no such process action: " + action));
}

asio::awaitable<Response> DataPlane::listProcesses(const Request& req, Target t) {
  auto l = co_await t.agent->listProcesses();
  if (!l.ok()) co_return fail(req, l.error());
  // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
  auto render = [l = std::move(*l)] {
    json::array items;
    items.reserve(l.size());
    for (const auto& p : l) items.push_back(processJson(p));
    return json::serialize(json::object{{"processes", std::move(items)}});
  };
  std::string body = co_await render_.run(std::move(render));
  co_return jsonResponse(req, http::status::ok, std::move(body));
}

}  // namespace vessel::api
