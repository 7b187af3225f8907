#include "api/data_plane.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/json.hpp>
#include <csignal>

#include "agentclient/guest_errors.h"
#include "api/data_plane_requests.h"
#include "api/sse_stream.h"
#include "base/base64.h"
#include "base/log.h"
#include "base/scope_exit.h"

namespace vessel::api {

namespace beast = boost::beast;
namespace json = boost::json;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto kKeepalive = kSseKeepalive;
constexpr auto kWriteTimeout = kSseWriteTimeout;
constexpr size_t kChannelDepth = 8;  // events buffered between the agent and a slow client

const Logger& log() {
  static const Logger l("data");
  return l;
}

std::string sseEvent(std::string_view type, const json::object& data) {
  return sseFrame(type, json::serialize(data));
}

// The guest's errno decides the code (agentclient/guest_errors.h), as for
// every front end; only the HTTP rendering is this plane's.
Error fromGuest(const Error& e) { return agentclient::guestError(e); }

Response fail(const Request& req, const Error& e) { return errorResponse(req, fromGuest(e)); }

Response refuse(const Request& req, const Error& e, const std::string& state = "") {
  if (!state.empty()) {
    json::object details{{"state", state}};
    return errorResponse(req, e, details);
  }
  return errorResponse(req, e);
}

Response noContent(const Request& req) {
  Response res{http::status::no_content, req.version()};
  res.set(http::field::server, "vessel");
  res.keep_alive(req.keep_alive());
  return res;
}

std::string pathOnly(std::string_view target) {
  std::string p(target);
  if (auto q = p.find('?'); q != std::string::npos) p.resize(q);
  return p;
}

std::string parentOf(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

// What a pump hands to the request's coroutine: an event, or why it ended.
template <typename T>
struct Item {
  std::optional<Error> error;
  T value{};
};
template <typename T>
using Channel = asio::experimental::channel<void(boost::system::error_code, Item<T>)>;

// Reads `source` (a Process or a Watch) into `ch` until its last event, so
// that the request's coroutine can wait for the next event, the client
// going away and its keepalive timer at once without losing an event. The
// channel's depth bounds what is buffered; the agent's flow control does
// the rest. Cancelled through its slot when the request ends first.
template <typename T, typename Source>
asio::awaitable<void> pump(std::shared_ptr<Source> source, std::shared_ptr<Channel<T>> ch,
                           std::shared_ptr<asio::cancellation_signal> keep_alive_signal) {
  (void)keep_alive_signal;  // the slot we run under lives in it
  for (;;) {
    auto next = source->next();
    auto r = co_await std::move(next);
    Item<T> item;
    bool last = !r.ok();
    if (r.ok()) {
      if constexpr (std::is_same_v<T, agentclient::ProcessEvent>)
        last = r->kind == agentclient::ProcessEvent::Kind::kExit;
      item.value = std::move(*r);
    } else {
      item.error = std::move(r).error();
    }
    boost::system::error_code none;
    auto [ec] = co_await ch->async_send(none, std::move(item), asio::as_tuple(asio::use_awaitable));
    if (ec || last) co_return;
  }
}

// Waits for the next item of `ch`, the client closing its side (it should
// send nothing after its request) or the keepalive timer.
enum class Woke { kItem, kClientGone, kKeepalive };
template <typename T>
asio::awaitable<std::pair<Woke, Item<T>>> nextOrGone(Channel<T>& ch, beast::tcp_stream& stream,
                                                     asio::steady_timer& keepalive) {
  char probe[64];
  keepalive.expires_after(kKeepalive);
  auto r = co_await (
      ch.async_receive(asio::as_tuple(asio::use_awaitable)) ||
      stream.socket().async_read_some(asio::buffer(probe), asio::as_tuple(asio::use_awaitable)) ||
      keepalive.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (r.index() == 0) {
    auto [ec, item] = std::move(std::get<0>(r));
    if (ec) {
      Item<T> gone;
      gone.error = Error(Code::kUnavailable, "event source ended");
      co_return std::make_pair(Woke::kItem, std::move(gone));
    }
    co_return std::make_pair(Woke::kItem, std::move(item));
  }
  if (r.index() == 1) co_return std::make_pair(Woke::kClientGone, Item<T>{});
  co_return std::make_pair(Woke::kKeepalive, Item<T>{});
}

json::object exitJson(const agentclient::ExitInfo& e) {
  return {{"exit_code", e.exited ? e.code : 128 + e.signal},
          {"exited", e.exited},
          {"signal", e.signal},
          {"timed_out", e.timed_out}};
}

json::object errorJson(const Error& e) {
  return {{"code", std::string(codeName(e.code()))}, {"message", e.message()}};
}

}  // namespace

DataPlane::DataPlane(asio::io_context& io, Sessions& sessions, LiveSandboxes& live,
                     DataPlaneLimits limits)
    : io_(io), sessions_(sessions), live_(live), limits_(limits) {}

DataPlane::~DataPlane() = default;

void DataPlane::install(HttpServer& server) {
  server.routeUpload(http::verb::put, "/v1/files", limits_.max_upload_bytes,
                     [this](const Request& req, BodyReader& body) { return upload(req, body); });
  server.routePrefix("/v1/", [this](const Request& req, beast::tcp_stream& stream) {
    return handle(req, stream);
  });
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
  return Target{s->sandbox_id, std::move(agent)};
}

asio::awaitable<std::optional<Response>> DataPlane::handle(const Request& req,
                                                           beast::tcp_stream& stream) {
  Response refusal;
  auto t = bind(req, &refusal);
  if (!t.ok()) co_return refusal;
  std::string path = pathOnly(req.target());
  auto m = req.method();
  auto notAllowed = [&](std::string_view allow) { return methodNotAllowed(req, path, allow); };
  if (path == "/v1/exec") {
    if (m != http::verb::post) co_return notAllowed("POST");
    co_return co_await exec(req, stream, std::move(*t));
  }
  if (path == "/v1/processes") {
    if (m != http::verb::get) co_return notAllowed("GET");
    co_return co_await listProcesses(req, std::move(*t));
  }
  constexpr std::string_view kProc = "/v1/processes/";
  if (path.rfind(kProc, 0) == 0) {
    std::string rest = path.substr(kProc.size());
    auto slash = rest.find('/');
    if (slash == std::string::npos)
      co_return fail(req, Error(Code::kNotFound, "no such endpoint: " + path));
    if (m != http::verb::post) co_return notAllowed("POST");
    co_return co_await process(req, std::move(*t), rest.substr(0, slash), rest.substr(slash + 1));
  }
  if (path == "/v1/files") {
    if (m == http::verb::get) co_return co_await download(req, stream, std::move(*t));
    if (m == http::verb::delete_) co_return co_await removeFile(req, std::move(*t));
    co_return notAllowed("GET, PUT, DELETE");  // PUT: the upload route
  }
  if (path == "/v1/files/list" || path == "/v1/files/stat" || path == "/v1/files/watch") {
    if (m != http::verb::get) co_return notAllowed("GET");
    if (path == "/v1/files/list") co_return co_await listFiles(req, std::move(*t));
    if (path == "/v1/files/stat") co_return co_await statFile(req, std::move(*t));
    co_return co_await watch(req, stream, std::move(*t));
  }
  if (path == "/v1/files/mkdir" || path == "/v1/files/move") {
    if (m != http::verb::post) co_return notAllowed("POST");
    if (path == "/v1/files/mkdir") co_return co_await mkdir(req, std::move(*t));
    co_return co_await move(req, std::move(*t));
  }
  co_return fail(req, Error(Code::kNotFound, "no such endpoint: " + path));
}

// --- processes ----------------------------------------------------------------

asio::awaitable<std::optional<Response>> DataPlane::exec(const Request& req,
                                                         beast::tcp_stream& stream, Target t) {
  auto in = parseExecRequest(req.body());
  if (!in.ok()) co_return fail(req, in.error());
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
  if (!co_await writeSseHead(stream, req)) {
    (void)co_await t.agent->signal(pid, SIGKILL);
    co_return std::nullopt;
  }
  json::object start{{"pid", pid}};
  std::string first = sseEvent("start", start);
  bool alive = co_await writeAll(stream, std::move(first));

  auto ch = std::make_shared<Channel<agentclient::ProcessEvent>>(io_, kChannelDepth);
  auto stop = std::make_shared<asio::cancellation_signal>();
  asio::co_spawn(io_, pump<agentclient::ProcessEvent>(proc, ch, stop),
                 asio::bind_cancellation_slot(stop->slot(), asio::detached));
  asio::steady_timer keepalive(io_);
  bool exited = false;
  while (alive) {
    auto [woke, item] = co_await nextOrGone<agentclient::ProcessEvent>(*ch, stream, keepalive);
    if (woke == Woke::kClientGone) break;
    if (woke == Woke::kKeepalive) {
      std::string ping(kSsePing);
      alive = co_await writeAll(stream, std::move(ping));
      continue;
    }
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
  stop->emit(asio::cancellation_type::terminal);
  ch->close();
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
  // Named, not a temporary argument: g++ 12 destroys a prvalue argument of
  // a coroutine twice.
  auto render = [l = std::move(*l)] {
    json::array items;
    items.reserve(l.size());
    for (const auto& p : l) items.push_back(processJson(p));
    return json::serialize(json::object{{"processes", std::move(items)}});
  };
  std::string body = co_await render_.run(std::move(render));
  co_return jsonResponse(req, http::status::ok, std::move(body));
}

// --- files --------------------------------------------------------------------

asio::awaitable<std::optional<Response>> DataPlane::download(const Request& req,
                                                             beast::tcp_stream& stream, Target t) {
  auto q = parseQuery(req.target(), {"path"});
  if (!q.ok()) co_return fail(req, q.error());
  auto path = guestPath((*q)["path"]);
  if (!path.ok()) co_return fail(req, path.error());
  auto open = t.agent->readFile(*path, 0);
  auto reader = co_await std::move(open);
  if (!reader.ok()) co_return fail(req, reader.error());

  // Chunked: a transfer cut short by a failure is visibly incomplete.
  http::response<http::empty_body> head{http::status::ok, req.version()};
  head.set(http::field::content_type, "application/octet-stream");
  head.set(http::field::server, "vessel");
  head.chunked(true);
  head.keep_alive(false);
  http::response_serializer<http::empty_body> sr(head);
  stream.expires_after(kWriteTimeout);
  auto [hec, hn] =
      co_await http::async_write_header(stream, sr, asio::as_tuple(asio::use_awaitable));
  if (hec) co_return std::nullopt;
  for (;;) {
    auto chunk = co_await (*reader)->read();
    if (!chunk.ok()) {
      log().forSandbox(t.sandbox_id).warn("download {}: {}", *path, chunk.error().message());
      break;  // no last chunk: the client sees a truncated transfer
    }
    stream.expires_after(kWriteTimeout);
    if (!chunk->has_value()) {
      auto last = http::make_chunk_last();
      auto [ec, n] = co_await asio::async_write(stream, last, asio::as_tuple(asio::use_awaitable));
      break;
    }
    if ((*chunk)->empty()) continue;
    auto body = http::make_chunk(asio::buffer(**chunk));
    auto [ec, n] = co_await asio::async_write(stream, body, asio::as_tuple(asio::use_awaitable));
    if (ec) break;
  }
  endStream(stream);
  co_return std::nullopt;
}

asio::awaitable<Response> DataPlane::upload(const Request& req, BodyReader& body) {
  Response refusal;
  auto t = bind(req, &refusal);
  if (!t.ok()) co_return refusal;
  auto q = parseQuery(req.target(), {"path", "mode"});
  if (!q.ok()) co_return fail(req, q.error());
  auto path = guestPath((*q)["path"]);
  if (!path.ok()) co_return fail(req, path.error());
  uint32_t mode = 0644;
  if (q->count("mode")) {
    auto m = modeParam((*q)["mode"]);
    if (!m.ok()) co_return fail(req, m.error());
    mode = *m;
  }
  // A new file belongs to the owner of its directory, so that uploads into
  // the unprivileged user's home are that user's.
  auto dir_stat = t->agent->stat(parentOf(*path));
  auto dir = co_await std::move(dir_stat);
  if (!dir.ok()) co_return fail(req, dir.error());
  if (static_cast<agentproto::FileType>(dir->type) != agentproto::FileType::kDir)
    co_return errorResponse(
        req, Error(Code::kInvalidArgument, "upload " + *path + ": parent is not a directory"));
  agentclient::WriteFileOptions opts;
  opts.path = *path;
  opts.mode = mode;
  opts.uid = dir->uid;
  opts.gid = dir->gid;
  auto open = t->agent->writeFile(opts);
  auto w = co_await std::move(open);
  if (!w.ok()) co_return fail(req, w.error());
  for (;;) {
    auto chunk = co_await body.next();
    if (!chunk.ok()) co_return fail(req, chunk.error());
    if (!chunk->has_value()) break;
    Status s = co_await (*w)->write(**chunk);
    if (!s.ok()) co_return fail(req, s.error());
  }
  Status fin = co_await (*w)->finish();
  if (!fin.ok()) co_return fail(req, fin.error());
  auto st = co_await t->agent->stat(*path);
  if (!st.ok()) co_return fail(req, st.error());
  auto name = path->substr(path->find_last_of('/') + 1);
  co_return jsonResponse(req, http::status::created, json::serialize(fileJson(*st, *path, name)));
}

asio::awaitable<Response> DataPlane::removeFile(const Request& req, Target t) {
  auto q = parseQuery(req.target(), {"path", "recursive"});
  if (!q.ok()) co_return fail(req, q.error());
  auto path = guestPath((*q)["path"]);
  if (!path.ok()) co_return fail(req, path.error());
  auto rec = boolParam(*q, "recursive", false);
  if (!rec.ok()) co_return fail(req, rec.error());
  auto op = t.agent->remove(*path, *rec);
  Status s = co_await std::move(op);
  if (!s.ok()) co_return fail(req, s.error());
  co_return noContent(req);
}

asio::awaitable<Response> DataPlane::listFiles(const Request& req, Target t) {
  auto q = parseQuery(req.target(), {"path", "depth"});
  if (!q.ok()) co_return fail(req, q.error());
  auto path = guestPath((*q)["path"]);
  if (!path.ok()) co_return fail(req, path.error());
  uint32_t depth = 1;
  if (q->count("depth")) {
    const std::string& d = (*q)["depth"];
    if (d.size() > 2 || d.empty() || d.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(d) < 1 || std::stoi(d) > 32)
      co_return fail(req, Error(Code::kInvalidArgument, "depth must be 1..32"));
    depth = static_cast<uint32_t>(std::stoi(d));
  }
  auto op = t.agent->list(*path, depth);
  auto l = co_await std::move(op);
  if (!l.ok()) co_return fail(req, l.error());
  std::string base = *path == "/" ? "" : *path;
  if (!base.empty() && base.back() == '/') base.pop_back();
  auto render = [l = std::move(*l), base] {
    json::array items;
    items.reserve(l.size());
    for (const auto& e : l) items.push_back(fileJson(e.stat, base + "/" + e.path, e.path));
    return json::serialize(json::object{{"entries", std::move(items)}});
  };
  std::string body = co_await render_.run(std::move(render));
  co_return jsonResponse(req, http::status::ok, std::move(body));
}

asio::awaitable<Response> DataPlane::statFile(const Request& req, Target t) {
  auto q = parseQuery(req.target(), {"path"});
  if (!q.ok()) co_return fail(req, q.error());
  auto path = guestPath((*q)["path"]);
  if (!path.ok()) co_return fail(req, path.error());
  auto op = t.agent->stat(*path);
  auto st = co_await std::move(op);
  if (!st.ok()) co_return fail(req, st.error());
  auto name = path->substr(path->find_last_of('/') + 1);
  co_return jsonResponse(req, http::status::ok, json::serialize(fileJson(*st, *path, name)));
}

asio::awaitable<Response> DataPlane::mkdir(const Request& req, Target t) {
  auto in = parseMkdirRequest(req.body());
  if (!in.ok()) co_return fail(req, in.error());
  auto op = t.agent->mkdir(in->path, in->mode, in->parents);
  Status s = co_await std::move(op);
  if (!s.ok()) co_return fail(req, s.error());
  co_return noContent(req);
}

asio::awaitable<Response> DataPlane::move(const Request& req, Target t) {
  auto in = parseMoveRequest(req.body());
  if (!in.ok()) co_return fail(req, in.error());
  auto op = t.agent->rename(in->from, in->to);
  Status s = co_await std::move(op);
  if (!s.ok()) co_return fail(req, s.error());
  co_return noContent(req);
}

asio::awaitable<std::optional<Response>> DataPlane::watch(const Request& req,
                                                          beast::tcp_stream& stream, Target t) {
  auto q = parseQuery(req.target(), {"path"});
  if (!q.ok()) co_return fail(req, q.error());
  auto path = guestPath((*q)["path"]);
  if (!path.ok()) co_return fail(req, path.error());
  auto open = t.agent->watch(*path);
  auto w = co_await std::move(open);
  if (!w.ok()) co_return fail(req, w.error());
  std::shared_ptr<agentclient::Watch> watch(std::move(*w));

  stream.expires_never();
  if (!co_await writeSseHead(stream, req)) co_return std::nullopt;
  // The watch is in place before this event: changes after it are seen.
  json::object ready{{"path", *path}};
  std::string first = sseEvent("ready", ready);
  bool alive = co_await writeAll(stream, std::move(first));
  auto ch = std::make_shared<Channel<agentclient::WatchEvent>>(io_, kChannelDepth);
  auto stop = std::make_shared<asio::cancellation_signal>();
  asio::co_spawn(io_, pump<agentclient::WatchEvent>(std::move(watch), ch, stop),
                 asio::bind_cancellation_slot(stop->slot(), asio::detached));
  asio::steady_timer keepalive(io_);
  while (alive) {
    auto [woke, item] = co_await nextOrGone<agentclient::WatchEvent>(*ch, stream, keepalive);
    if (woke == Woke::kClientGone) break;
    if (woke == Woke::kKeepalive) {
      std::string ping(kSsePing);
      alive = co_await writeAll(stream, std::move(ping));
      continue;
    }
    if (item.error) {
      std::string msg = sseEvent("error", errorJson(*item.error));
      (void)co_await writeAll(stream, std::move(msg));
      break;
    }
    std::string out;
    for (const auto& type : watchEventNames(item.value.kind)) {
      json::object data{{"name", item.value.name}};
      out += sseEvent(type, data);
    }
    if (!out.empty()) alive = co_await writeAll(stream, std::move(out));
  }
  stop->emit(asio::cancellation_type::terminal);
  ch->close();
  endStream(stream);
  co_return std::nullopt;
}

}  // namespace vessel::api
