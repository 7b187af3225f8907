// Server-Sent Events for operations: GET /v1/operations/{id}/events ends
// after the operation's last event; GET /v1/events follows every event of
// the tenant until the client goes away. Both replay what the client missed
// when it reconnects with Last-Event-ID (events are stored, ids increase).
#include "http/sse.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <charconv>

#include "api/control_plane.h"
#include "base/scope_exit.h"

namespace vessel::api {

namespace beast = boost::beast;
using namespace std::chrono_literals;

namespace {

constexpr int kBatch = 100;

bool terminalType(const std::string& type) {
  return type == "operation.done" || type == "operation.failed";
}

}  // namespace

asio::awaitable<std::optional<Response>> ControlPlane::streamEvents(const Request& req,
                                                                    beast::tcp_stream& stream,
                                                                    std::string tenant,
                                                                    std::string op_id) {
  int64_t after = 0;
  if (auto it = req.find("Last-Event-ID"); it != req.end()) {
    std::string_view v = it->value();
    auto [p, e] = std::from_chars(v.data(), v.data() + v.size(), after);
    if (e != std::errc() || p != v.data() + v.size() || after < 0)
      co_return errorResponse(req, Error(Code::kInvalidArgument, "bad Last-Event-ID"));
  }
  if (!op_id.empty()) {
    auto op = store_.getOperation(tenant, op_id);
    if (!op.ok()) co_return errorResponse(req, op.error());
    if (!op->has_value())
      co_return errorResponse(req,
                              Error(Code::kNotFound, "operation " + op_id + " does not exist"));
  }

  bool head_written = co_await writeSseHead(stream, req);
  if (!head_written) co_return std::nullopt;

  // Subscribed before the first read: nothing published after it is missed.
  // An operation's stream is woken by that operation's events only.
  auto sub = lifecycle_.operations().subscribe(tenant, stream.get_executor(), op_id);
  for (;;) {
    // The operation's state is read before its events: once it is final,
    // every event it will ever have is already stored.
    bool finished = false;
    if (!op_id.empty()) {
      auto op = store_.getOperation(tenant, op_id);
      if (!op.ok() || !op->has_value()) break;
      finished = store::finished((*op)->state);
    }
    auto events = store_.listEvents(tenant, op_id, after, kBatch);
    if (!events.ok()) break;
    std::string out;
    bool ended = false;
    for (const auto& e : *events) {
      out += sseFrame(e.type, e.data_json, e.seq);
      after = e.seq;
      if (!op_id.empty() && terminalType(e.type)) ended = true;
    }
    if (!out.empty()) {
      // (g++ 12: named result, see CONTRIBUTING.md "Coroutines under g++ 12" rule 3.)
      bool written = co_await writeAll(stream, std::move(out));
      if (!written || ended) break;
      continue;
    }
    if (finished) break;
    bool woken = co_await sub->wait(std::chrono::steady_clock::now() + kSseKeepalive);
    if (!woken) {
      bool written = co_await writeAll(stream, std::string(kSsePing));
      if (!written) break;
    }
  }
  endStream(stream);
  co_return std::nullopt;
}

}  // namespace vessel::api
