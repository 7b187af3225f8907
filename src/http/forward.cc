#include "http/forward.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <charconv>
#include <string>

#include "http/relay.h"
#include "http/tls_client.h"

namespace vessel::http {

namespace beast = boost::beast;
using tcp = asio::ip::tcp;

namespace {

// Relayed in pieces of this size: what one forwarded request holds in
// memory per direction, however long its body.
constexpr size_t kChunk = 64 * 1024;

// Headers that describe one hop's connection, not the message (RFC 9110
// 7.6.1): each side of the forwarder has its own.
template <class Fields>
void dropHopByHop(Fields& f) {
  for (auto field : {http::field::connection, http::field::keep_alive,
                     http::field::proxy_connection, http::field::te, http::field::trailer,
                     http::field::upgrade, http::field::proxy_authorization})
    f.erase(field);
}

// A link that dies without a FIN or RST (a node's cable cut) must not hold
// a forwarded stream forever: probe idle connections, and give up on
// unacknowledged data, within about half a minute.
void keepProbing(tcp::socket& s) {
  int fd = s.native_handle();
  int on = 1, idle = 10, interval = 5, count = 3;
  unsigned user_timeout_ms = 30'000;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

// Whether a kept connection was closed by the upstream while idle (its
// idle timeout): a pending EOF or error, seen without blocking. Over TLS,
// any pending byte too: an idle TLS connection's only unasked-for record
// is the peer's close_notify.
bool closedWhileIdle(tcp::socket& s, bool tls) {
  char b;
  ssize_t n = ::recv(s.native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  return tls;  // plain: bytes nobody asked for, the next read fails on them
}

// Relays one message body from a parser (reading `in`) to a serializer
// (writing `out`), each piece as soon as it arrives (a read returns what
// is there, up to kChunk: a stream's small messages are not held back).
// `read_ok`/`write_ok` say which side failed.
template <bool isRequest, class InStream, class OutStream>
asio::awaitable<void> relayBody(InStream& in, beast::flat_buffer& in_buf,
                                http::parser<isRequest, http::buffer_body>& p, OutStream& out,
                                http::serializer<isRequest, http::buffer_body>& sr, bool& read_ok,
                                bool& write_ok) {
  std::string chunk(kChunk, '\0');
  read_ok = write_ok = true;
  for (;;) {
    size_t got = 0;
    if (!p.is_done()) {
      p.get().body().data = chunk.data();
      p.get().body().size = chunk.size();
      auto [ec, n] =
          co_await http::async_read_some(in, in_buf, p, asio::as_tuple(asio::use_awaitable));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        read_ok = false;
        co_return;
      }
      got = chunk.size() - p.get().body().size;
      // Only framing (a chunk's size line) so far: nothing to pass on. An
      // empty piece would read as the end of a chunked body.
      if (got == 0 && !p.is_done()) continue;
    }
    p.get().body().data = got ? chunk.data() : nullptr;
    p.get().body().size = got;
    p.get().body().more = !p.is_done();
    auto [wec, wn] = co_await http::async_write(out, sr, asio::as_tuple(asio::use_awaitable));
    if (wec == http::error::need_buffer) wec = {};
    if (wec) {
      write_ok = false;
      co_return;
    }
    if (sr.is_done()) co_return;
  }
}

}  // namespace

Result<Upstream> upstreamFromUrl(std::string_view url) {
  constexpr std::string_view kHttp = "http://", kHttps = "https://";
  Upstream u;
  u.tls = url.substr(0, kHttps.size()) == kHttps;
  if (!u.tls && url.substr(0, kHttp.size()) != kHttp)
    return Error(Code::kInvalidArgument,
                 "upstream '" + std::string(url) + "' is not http:// or https://");
  std::string_view rest = url.substr(u.tls ? kHttps.size() : kHttp.size());
  rest = rest.substr(0, rest.find('/'));
  u.port = u.tls ? 443 : 80;
  auto colon = rest.rfind(':');
  if (colon != std::string_view::npos) {
    std::string_view p = rest.substr(colon + 1);
    unsigned v = 0;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (ec != std::errc() || end != p.data() + p.size() || v == 0 || v > 65535)
      return Error(Code::kInvalidArgument, "upstream '" + std::string(url) + "': bad port");
    u.port = static_cast<uint16_t>(v);
    rest = rest.substr(0, colon);
  }
  if (rest.empty())
    return Error(Code::kInvalidArgument, "upstream '" + std::string(url) + "' has no host");
  u.host = std::string(rest);
  return u;
}

void UpstreamConnection::close() {
  tls_.reset();  // before the stream it is over
  if (stream_) {
    boost::system::error_code ec;
    stream_->socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_->socket().close(ec);
  }
  stream_.reset();
  at_.reset();
  buf_.clear();
}

asio::awaitable<Status> UpstreamConnection::ensure(const Upstream& to,
                                                   const ForwardLimits& limits) {
  if (stream_ && at_ == to && stream_->socket().is_open() &&
      !(tls_ && SSL_pending(tls_->native_handle()) > 0) &&
      !closedWhileIdle(stream_->socket(), to.tls))
    co_return okStatus();
  close();
  if (to.tls && !limits.tls)
    co_return Error(Code::kFailedPrecondition,
                    "upstream " + to.str() + " speaks TLS and this listener has no TLS client");
  tcp::resolver resolver(ex_);
  auto [rec, eps] = co_await resolver.async_resolve(to.host, std::to_string(to.port),
                                                    asio::as_tuple(asio::use_awaitable));
  if (rec) co_return Error(Code::kUnavailable, "resolve " + to.str() + ": " + rec.message());
  stream_.emplace(ex_);
  stream_->expires_after(limits.connect_timeout);
  auto [cec, ep] = co_await stream_->async_connect(eps, asio::as_tuple(asio::use_awaitable));
  if (cec) {
    close();
    co_return Error(Code::kUnavailable, "connect to " + to.str() + ": " + cec.message());
  }
  keepProbing(stream_->socket());
  if (to.tls) {
    // Verified before a byte of the request goes: a node that is not the
    // operator's never sees a client's request or its tokens.
    tls_ = std::make_unique<TlsStream>(*stream_, *limits.tls);
    expectServer(tls_->native_handle(), to.host);
    auto [hec] = co_await tls_->async_handshake(asio::ssl::stream_base::client,
                                                asio::as_tuple(asio::use_awaitable));
    if (hec) {
      std::string why = handshakeError(tls_->native_handle(), hec);
      close();
      co_return Error(Code::kUnavailable, "TLS to " + to.str() + ": " + why);
    }
  }
  stream_->expires_never();
  at_ = to;
  co_return okStatus();
}

namespace {

// Long because one forwarded exchange is one sequence (head checks, the
// body pumped up, the response relayed down) whose steps share the two
// streams and one cleanup. `ups` is the upstream's stream, plain or TLS.
template <class UpStream>
asio::awaitable<Result<Forwarded>> forwardOver(beast::tcp_stream& client,
                                               beast::flat_buffer& client_buf,
                                               http::request_parser<http::empty_body>& head,
                                               const Upstream& to, UpstreamConnection& up,
                                               UpStream& ups, const ForwardLimits& limits) {
  const bool client_keep_alive = head.get().keep_alive();
  const bool head_only = head.get().method() == http::verb::head;
  // Expect: 100-continue is answered here: the body is read only once the
  // upstream is connected, and the upstream is not asked to say it again.
  bool expect_continue = false;
  if (auto it = head.get().find(http::field::expect);
      it != head.get().end() && beast::iequals(it->value(), "100-continue"))
    expect_continue = true;

  http::request_parser<http::buffer_body> req_parser(std::move(head));
  req_parser.body_limit(boost::none);  // streamed, never held
  auto& req = req_parser.get();
  dropHopByHop(req);
  req.erase(http::field::expect);
  req.keep_alive(true);
  Forwarded out;
  if (expect_continue) {
    static const std::string k100 = "HTTP/1.1 100 Continue\r\n\r\n";
    auto [ec, n] =
        co_await asio::async_write(client, asio::buffer(k100), asio::as_tuple(asio::use_awaitable));
    if (ec) {
      up.close();
      co_return out;
    }
  }
  {
    http::request_serializer<http::buffer_body> sr(req);
    auto [hec, hn] =
        co_await http::async_write_header(ups, sr, asio::as_tuple(asio::use_awaitable));
    if (hec) {
      // Nothing went to the client yet: the caller answers.
      up.close();
      co_return Error(Code::kUnavailable, "forward to " + to.str() + ": " + hec.message());
    }
    bool read_ok = true, write_ok = true;
    co_await relayBody(client, client_buf, req_parser, ups, sr, read_ok, write_ok);
    if (!read_ok || !write_ok) {
      // A client that broke off its body, or an upstream that stopped
      // taking it: neither connection can carry another request.
      up.close();
      co_return out;
    }
  }

  // Interim responses (103 Early Hints, a 100 the upstream sends anyway)
  // are passed on and the final one is still to come (http/relay.h); the
  // request's Upgrade was dropped above, so a 101 is the upstream's error.
  std::optional<http::response_parser<http::buffer_body>> res_parser;
  for (;;) {
    res_parser.emplace();
    res_parser->header_limit(static_cast<uint32_t>(limits.max_response_header_bytes));
    res_parser->body_limit(boost::none);
    if (head_only) res_parser->skip(true);
    auto [rec, rn] = co_await http::async_read_header(ups, up.buffer(), *res_parser,
                                                      asio::as_tuple(asio::use_awaitable));
    if (rec) {
      up.close();
      co_return out;  // the client's connection is cut: no answer came
    }
    auto kind = classifyResponse(res_parser->get().result_int(), false);
    if (kind == ResponseKind::kFinal) break;
    if (kind != ResponseKind::kInterim) {
      up.close();
      co_return out;  // cut: a switch nobody asked for
    }
    auto& interim = res_parser->get();
    dropHopByHop(interim);
    http::response_serializer<http::buffer_body> isr(interim);
    auto [iec, in] =
        co_await http::async_write_header(client, isr, asio::as_tuple(asio::use_awaitable));
    if (iec) {
      up.close();
      co_return out;
    }
  }
  auto& res = res_parser->get();
  out.status = res.result_int();
  const bool upstream_keep_alive = res.keep_alive();
  // A body that only the end of the connection delimits cannot be followed
  // by another request on the client's connection either.
  const bool delimited = head_only || res.chunked() || res.has_content_length() ||
                         res.result_int() == 204 || res.result_int() == 304;
  dropHopByHop(res);
  res.keep_alive(client_keep_alive && delimited);
  {
    http::response_serializer<http::buffer_body> sr(res);
    bool read_ok = true, write_ok = true;
    auto [hec, hn] =
        co_await http::async_write_header(client, sr, asio::as_tuple(asio::use_awaitable));
    if (hec) {
      up.close();
      co_return out;
    }
    if (!head_only)
      co_await relayBody(ups, up.buffer(), *res_parser, client, sr, read_ok, write_ok);
    if (!read_ok || !write_ok) {
      up.close();
      co_return out;  // cut: the client sees the body end early, as the upstream's did
    }
  }
  if (!upstream_keep_alive || !delimited) up.close();
  out.keep_alive = client_keep_alive && delimited;
  co_return out;
}

}  // namespace

asio::awaitable<Result<Forwarded>> forwardRequest(beast::tcp_stream& client,
                                                  beast::flat_buffer& client_buf,
                                                  http::request_parser<http::empty_body>& head,
                                                  const Upstream& to, UpstreamConnection& up,
                                                  const ForwardLimits& limits) {
  auto ready = co_await up.ensure(to, limits);
  if (!ready.ok()) co_return std::move(ready).error();
  if (auto* tls = up.tls())
    co_return co_await forwardOver(client, client_buf, head, to, up, *tls, limits);
  co_return co_await forwardOver(client, client_buf, head, to, up, up.stream(), limits);
}

}  // namespace vessel::http
