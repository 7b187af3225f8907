// envd's server streams (process Start and Connect, filesystem WatchDir):
// the chunked Connect response and the one loop that feeds it.
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/serialize.hpp>
#include <cstdio>

#include "e2b/envd/connect.h"
#include "e2b/envd/services.h"

namespace vessel::e2b::envd {

using namespace asio::experimental::awaitable_operators;

namespace {
constexpr auto kWriteTimeout = std::chrono::seconds(30);
}

asio::awaitable<bool> ConnectStream::head() {
  http::response<http::empty_body> h{http::status::ok, req_.version()};
  h.set(http::field::content_type, "application/connect+json");
  h.set(http::field::server, "vessel");
  h.chunked(true);
  // Keep-alive whenever the client allows it: on a `Connection: close`
  // response undici takes the connection closing as the body's end, so a
  // cut stream would look ended instead of failed.
  h.keep_alive(req_.keep_alive());
  http::response_serializer<http::empty_body> sr(h);
  s_.expires_after(kWriteTimeout);
  auto [ec, n] = co_await http::async_write_header(s_, sr, asio::as_tuple(asio::use_awaitable));
  co_return !ec;
}

asio::awaitable<bool> ConnectStream::chunk(std::string data) {
  char len[20];
  int n = std::snprintf(len, sizeof len, "%zx\r\n", data.size());
  data.insert(0, len, static_cast<size_t>(n));
  data += "\r\n";
  s_.expires_after(kWriteTimeout);
  auto [ec, w] =
      co_await asio::async_write(s_, asio::buffer(data), asio::as_tuple(asio::use_awaitable));
  co_return !ec;
}

asio::awaitable<bool> ConnectStream::send(const json::object& msg) {
  co_return co_await chunk(encodeEnvelope(0, json::serialize(msg)));
}

asio::awaitable<bool> ConnectStream::end(const Error* error) {
  if (!co_await chunk(endStreamEnvelope(error))) co_return false;
  std::string last = "0\r\n\r\n";
  s_.expires_after(kWriteTimeout);
  auto [ec, n] =
      co_await asio::async_write(s_, asio::buffer(last), asio::as_tuple(asio::use_awaitable));
  co_return !ec;
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
  while (alive) {
    ka.expires_after(spec.keepalive_interval ? *spec.keepalive_interval
                                             : std::chrono::seconds(3600));
    // A read while we only write: it completes when the client goes away
    // (the client sends nothing more on a server stream).
    std::array<char, 64> probe;
    auto r = co_await (
        next() ||
        stream.socket().async_read_some(asio::buffer(probe), asio::as_tuple(asio::use_awaitable)) ||
        ka.async_wait(asio::as_tuple(asio::use_awaitable)) ||
        limit.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (r.index() == 1) break;
    if (r.index() == 2) {
      if (spec.keepalive_interval) alive = co_await out.send(spec.keepalive);
      continue;
    }
    if (r.index() == 3) {
      Error e(Code::kDeadlineExceeded, spec.deadline_message);
      if (co_await out.end(&e) && req.keep_alive()) co_return http::writtenKeepAlive();
      break;
    }
    StreamStep step = std::move(std::get<0>(r));
    for (const auto& m : step.messages)
      if (!(alive = co_await out.send(m))) break;
    if (!alive) break;
    if (step.kind == StreamStep::Kind::kCut) {
      out.cut();
      break;
    }
    if (step.kind == StreamStep::Kind::kEnd) {
      if (co_await out.end(step.error ? &*step.error : nullptr) && req.keep_alive())
        co_return http::writtenKeepAlive();
      break;
    }
  }
  co_return std::nullopt;
}

}  // namespace vessel::e2b::envd
