// GET /v1/sandboxes/{id}/logs (docs/logs.md): the sandbox's log as JSON
// lines, or with follow=true as Server-Sent Events that go on until the
// sandbox is deleted and its last entry sent (or the client goes away),
// resuming after Last-Event-ID when it reconnects.
#include <boost/json.hpp>
#include <charconv>

#include "api/control_plane.h"
#include "api/resources.h"
#include "http/sse.h"

namespace vessel::api {

namespace beast = boost::beast;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// Entries another process stores (a node's command log in a cluster) wake
// no follower here: each reads the store again this often.
constexpr auto kFollowPoll = 1s;

}  // namespace

asio::awaitable<std::optional<Response>> ControlPlane::sandboxLogs(const Request& req,
                                                                   beast::tcp_stream& stream,
                                                                   std::string tenant,
                                                                   std::string id) {
  auto in = parseLogsQuery(req.target());
  if (!in.ok()) co_return errorResponse(req, in.error());
  store::LogQuery q = in->q;
  if (auto it = req.find("Last-Event-ID"); in->follow && it != req.end()) {
    std::string_view v = it->value();
    auto [p, e] = std::from_chars(v.data(), v.data() + v.size(), q.after_seq);
    if (e != std::errc() || p != v.data() + v.size() || q.after_seq < 0)
      co_return errorResponse(req, Error(Code::kInvalidArgument, "bad Last-Event-ID"));
  }
  // Read once first: another tenant's sandbox (or none) is a 404 either way.
  auto first = lifecycle_.readLog(tenant, id, q);
  if (!first.ok()) co_return errorResponse(req, first.error());
  if (!in->follow) {
    std::string body;
    for (const auto& e : *first) {
      body += json::serialize(ops::logEntryJson(e));
      body += '\n';
    }
    Response res = jsonResponse(req, http::status::ok, std::move(body));
    res.set(http::field::content_type, "application/x-ndjson");
    co_return res;
  }

  // (g++ 12: named result, see CONTRIBUTING.md "Coroutines under g++ 12" rule 3.)
  bool opened = co_await writeSseHead(stream, req);
  if (!opened) co_return std::nullopt;
  auto sub = lifecycle_.sandboxLog().subscribe(id, stream.get_executor());
  auto last_write = std::chrono::steady_clock::now();
  std::vector<store::LogRecord> batch = std::move(*first);
  for (;;) {
    std::string out;
    for (const auto& e : batch) {
      out += sseFrame("log", json::serialize(ops::logEntryJson(e)), e.seq);
      q.after_seq = e.seq;
    }
    if (!out.empty()) {
      // (g++ 12: named result, see CONTRIBUTING.md "Coroutines under g++ 12" rule 3.)
      bool written = co_await writeAll(stream, std::move(out));
      if (!written) break;
      last_write = std::chrono::steady_clock::now();
    }
    // Its state before its entries: once it is deleted, every entry it
    // will ever have is stored, and the read after this one has them all.
    auto sb = store_.getSandbox(tenant, id);
    if (!sb.ok() || !sb->has_value()) break;
    bool ended = (*sb)->state == store::SandboxState::kDeleted;
    if (batch.size() < static_cast<size_t>(q.limit) && !ended) {
      bool woken = co_await sub->wait(std::chrono::steady_clock::now() + kFollowPoll);
      (void)woken;  // woken or not, the store is read again
      if (std::chrono::steady_clock::now() - last_write >= kSseKeepalive) {
        bool written = co_await writeAll(stream, std::string(kSsePing));
        if (!written) break;
        last_write = std::chrono::steady_clock::now();
      }
    }
    auto next = lifecycle_.readLog(tenant, id, q);
    if (!next.ok()) break;
    if (ended && next->empty()) break;
    batch = std::move(*next);
  }
  endStream(stream);
  co_return std::nullopt;
}

}  // namespace vessel::api
