// The data plane's files: download and upload streamed, list, stat, mkdir,
// move, remove, and directory watches as SSE.
#include "api/data_plane.h"
#include "api/data_plane_requests.h"
#include "api/data_plane_stream.h"
#include "base/base64.h"
#include "base/scope_exit.h"
#include "http/headers.h"

namespace vessel::api {

using namespace data_plane;  // NOLINT(google-build-using-namespace): the plane's own helpers
using namespace std::chrono_literals;

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
  http::setDownloadHeaders(head, "attachment", path->substr(path->find_last_of('/') + 1));
  head.set(http::field::server, "vessel");
  head.keep_alive(false);
  ChunkedWriter out(stream, kWriteTimeout);
  bool started = co_await out.head(std::move(head));
  if (!started) co_return std::nullopt;
  uint64_t size = 0;
  auto read = [&reader, &size]() -> asio::awaitable<Result<std::optional<std::string>>> {
    auto chunk = co_await (*reader)->read();
    if (chunk.ok() && chunk->has_value()) size += (*chunk)->size();
    co_return chunk;
  };
  auto copied = co_await copyChunks(out, read);
  // A failure leaves out the last chunk: the client sees a truncated transfer.
  if (!copied.ok())
    log().forSandbox(t.sandbox_id).warn("download {}: {}", *path, copied.error().message());
  else if (*copied)
    t.agent->noteFile({.origin = t.session_id, .op = "read", .path = *path, .size = size});
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
  t->agent->noteFile({.origin = t->session_id, .op = "write", .path = *path, .size = st->size});
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
  t.agent->noteFile({.origin = t.session_id, .op = "remove", .path = *path});
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
  t.agent->noteFile({.origin = t.session_id, .op = "mkdir", .path = in->path});
  co_return noContent(req);
}

asio::awaitable<Response> DataPlane::move(const Request& req, Target t) {
  auto in = parseMoveRequest(req.body());
  if (!in.ok()) co_return fail(req, in.error());
  auto op = t.agent->rename(in->from, in->to);
  Status s = co_await std::move(op);
  if (!s.ok()) co_return fail(req, s.error());
  t.agent->noteFile({.origin = t.session_id, .op = "rename", .path = in->from, .to = in->to});
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
  bool head_written = co_await writeSseHead(stream, req);
  if (!head_written) co_return std::nullopt;
  // The watch is in place before this event: changes after it are seen.
  json::object ready{{"path", *path}};
  std::string first = sseEvent("ready", ready);
  bool alive = co_await writeAll(stream, std::move(first));
  agentclient::EventStream<agentclient::WatchEvent> events(io_, std::move(watch), kChannelDepth);
  asio::steady_timer keepalive(io_);
  asio::steady_timer never(io_, asio::steady_timer::time_point::max());
  while (alive) {
    auto woke = co_await nextEvent(events, stream, keepalive, never);
    if (woke.woke == Woke::kClientGone) break;
    if (woke.woke != Woke::kNext) {
      std::string ping(kSsePing);
      alive = co_await writeAll(stream, std::move(ping));
      continue;
    }
    const agentclient::StreamItem<agentclient::WatchEvent>& item = *woke.next;
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
  events.stop();
  endStream(stream);
  co_return std::nullopt;
}

}  // namespace vessel::api
