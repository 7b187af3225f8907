// envd's server streams (process Start and Connect, filesystem WatchDir):
// the Connect envelopes on the shared chunked writer and wait
// (http/stream.h), and the one loop that feeds them.
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/json/serialize.hpp>

#include "e2b/envd/connect.h"
#include "e2b/envd/services.h"

namespace vessel::e2b::envd {

asio::awaitable<bool> ConnectStream::head() {
  http::response<http::empty_body> h{http::status::ok, req_.version()};
  h.set(http::field::content_type, "application/connect+json");
  h.set(http::field::server, "vessel");
  // Keep-alive whenever the client allows it: on a `Connection: close`
  // response undici takes the connection closing as the body's end, so a
  // cut stream would look ended instead of failed.
  h.keep_alive(req_.keep_alive());
  co_return co_await out_.head(std::move(h));
}

asio::awaitable<bool> ConnectStream::send(const json::object& msg) {
  std::string envelope = encodeEnvelope(0, json::serialize(msg));
  co_return co_await out_.chunk(envelope);
}

asio::awaitable<bool> ConnectStream::end(const Error* error) {
  std::string envelope = endStreamEnvelope(error);
  co_return co_await out_.last(envelope);
}

void ConnectStream::cut() {
  boost::system::error_code ec;
  s_.socket().set_option(asio::socket_base::linger(true, 0), ec);
  s_.socket().close(ec);
}

asio::awaitable<std::optional<Response>> serveStream(asio::io_context& io, const Request& req,
                                                     beast::tcp_stream& stream,
                                                     const StreamSpec& spec,
                                                     const StreamSource& next) {
  ConnectStream out(stream, req);
  stream.expires_never();
  bool alive = co_await out.head();
  if (alive) alive = co_await out.send(spec.first);
  asio::steady_timer ka(io);
  asio::steady_timer limit(io, asio::steady_timer::time_point::max());
  if (spec.deadline) limit.expires_after(*spec.deadline);
  std::chrono::steady_clock::duration ka_every = std::chrono::seconds(3600);
  if (spec.keepalive_interval) ka_every = *spec.keepalive_interval;
  while (alive) {
    auto step_of = next();
    auto woke = co_await http::nextOrGone(std::move(step_of), stream, ka, ka_every, limit);
    if (woke.woke == http::Woke::kClientGone) break;
    if (woke.woke == http::Woke::kKeepalive) {
      if (spec.keepalive_interval) alive = co_await out.send(spec.keepalive);
      continue;
    }
    if (woke.woke == http::Woke::kDeadline) {
      Error e(Code::kDeadlineExceeded, spec.deadline_message);
      bool ended = co_await out.end(&e);
      if (ended && req.keep_alive()) co_return http::writtenKeepAlive();
      break;
    }
    StreamStep& step = *woke.next;
    for (const auto& m : step.messages) {
      alive = co_await out.send(m);
      if (!alive) break;
    }
    if (!alive) break;
    if (step.kind == StreamStep::Kind::kCut) {
      out.cut();
      break;
    }
    if (step.kind == StreamStep::Kind::kEnd) {
      bool ended = co_await out.end(step.error ? &*step.error : nullptr);
      if (ended && req.keep_alive()) co_return http::writtenKeepAlive();
      break;
    }
  }
  co_return std::nullopt;
}

}  // namespace vessel::e2b::envd
