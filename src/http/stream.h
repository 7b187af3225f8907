#pragma once
// Streaming a response on a connection the handler owns, the parts every
// streaming front end shares whatever its wire format (the data plane's
// downloads and SSE streams, envd's downloads and Connect server streams):
// the chunked writer and the download loop on it, and the wait for a stream's next event that also
// notices the client going away and fires its keepalive and deadline.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <chrono>
#include <optional>
#include <string_view>

#include "http/server.h"

namespace vessel::http {

// A chunked response: a transfer cut short (no last chunk) is visibly
// incomplete to the client, where a response delimited by the connection's
// end would look whole. Every write is bounded by `timeout`, so a client
// that stops reading is dropped rather than holding the server. What to do
// on a failure (close, reset, half-close) is the caller's.
class ChunkedWriter {
 public:
  explicit ChunkedWriter(boost::beast::tcp_stream& s,
                         std::chrono::seconds timeout = std::chrono::seconds(30))
      : s_(s), timeout_(timeout) {}
  // Writes `head`, made chunked. False if the client is gone.
  asio::awaitable<bool> head(http::response<http::empty_body> head);
  // One chunk of `data`; nothing for empty data (an empty chunk would be
  // the last). False if the client is gone.
  asio::awaitable<bool> chunk(std::string_view data);
  // `data` (if any) and the last chunk in one write: the response is whole.
  asio::awaitable<bool> last(std::string_view data = {});

 private:
  boost::beast::tcp_stream& s_;
  std::chrono::seconds timeout_;
};

// A download: writes what `next()` yields (an awaitable of
// Result<std::optional<std::string>>: a piece, or nullopt at the end) as
// chunks, then the last chunk. True once whole, false when the client went
// away, the source's Error when it failed: then no last chunk was written,
// and the caller ends the connection so that the client sees a cut.
template <typename Next>
asio::awaitable<Result<bool>> copyChunks(ChunkedWriter& out, Next& next) {
  for (;;) {
    auto piece = co_await next();
    if (!piece.ok()) co_return std::move(piece).error();
    if (!piece->has_value()) {
      bool ended = co_await out.last();
      co_return ended;
    }
    bool sent = co_await out.chunk(**piece);
    if (!sent) co_return false;
  }
}

// What ended a wait for a stream's next event.
enum class Woke { kNext, kClientGone, kKeepalive, kDeadline };
template <typename T>
struct Wakeup {
  Woke woke = Woke::kNext;
  std::optional<T> next;  // with kNext
};

// Waits for `next` (a stream's next event), the client closing its side of
// `stream` (a client of a server stream sends nothing after its request, so
// any read completing means it went away), `keepalive_every` passing (the
// keepalive timer is re-armed each call) and the `deadline` timer (one that
// never fires: expires at time_point::max()), whichever comes first. The
// others are cancelled: `next` must lose nothing by that (a channel receive
// does not).
template <typename T>
asio::awaitable<Wakeup<T>> nextOrGone(asio::awaitable<T> next, boost::beast::tcp_stream& stream,
                                      asio::steady_timer& keepalive,
                                      std::chrono::steady_clock::duration keepalive_every,
                                      asio::steady_timer& deadline) {
  using namespace asio::experimental::awaitable_operators;  // NOLINT: the || of awaitables
  char probe[64];
  keepalive.expires_after(keepalive_every);
  auto r = co_await (
      std::move(next) ||
      stream.socket().async_read_some(asio::buffer(probe), asio::as_tuple(asio::use_awaitable)) ||
      keepalive.async_wait(asio::as_tuple(asio::use_awaitable)) ||
      deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
  Wakeup<T> w;
  switch (r.index()) {
    case 0: w.next.emplace(std::move(std::get<0>(r))); break;
    case 1: w.woke = Woke::kClientGone; break;
    case 2: w.woke = Woke::kKeepalive; break;
    default: w.woke = Woke::kDeadline;
  }
  co_return w;
}

}  // namespace vessel::http
