#pragma once
// A small HTTP/1.1 server on Boost.Beast with C++20 coroutines: one
// coroutine per connection, keep-alive, and hard limits on header and body
// sizes and on idle time, since every caller is untrusted. Requests go
// through the server's one Router (http/router.h), where every front end
// declares its route table; a route's handler may write the response to
// the stream itself, as Server-Sent Events do.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/object.hpp>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/host_port.h"
#include "base/result.h"
#include "http/forward.h"
#include "http/names.h"
#include "http/router.h"
#include "metrics/registry.h"

namespace vessel::http {

using Handler = std::function<asio::awaitable<Response>(const Request&)>;
// Returns the response to write, or nullopt when it wrote to the stream
// itself (then the connection closes afterwards), or writtenKeepAlive()
// when it wrote a whole response itself and the connection may carry the
// next request.
using StreamHandler = std::function<asio::awaitable<std::optional<Response>>(
    const Request&, boost::beast::tcp_stream&)>;
// A StreamHandler's answer for "I wrote and ended the response on a
// keep-alive connection": the server reads the next request from it instead
// of closing it. Clients such as undici treat a close after a
// `Connection: close` response as its end whatever was cut, so a stream that
// must be able to fail visibly is sent keep-alive, and a clean end then
// leaves the connection usable (a close right after it would race the
// client's next request). Never written: it is not a response.
Response writtenKeepAlive();
bool isWrittenKeepAlive(const Response& res);

// The body of a request whose route streams it (uploads): read in chunks
// as the handler consumes them, never whole. A client that sent
// `Expect: 100-continue` is told to go on only when the handler first reads.
class BodyReader {
 public:
  BodyReader(boost::beast::tcp_stream& stream, boost::beast::flat_buffer& buf,
             http::request_parser<http::buffer_body>& parser, uint64_t limit)
      : stream_(stream), buf_(buf), parser_(parser), limit_(limit) {}
  // The next chunk, or nullopt at the end of the body. More than the
  // route's limit is kResourceExhausted; a broken connection kUnavailable.
  asio::awaitable<Result<std::optional<std::string>>> next();
  bool done() const { return parser_.is_done(); }
  uint64_t received() const { return received_; }

 private:
  boost::beast::tcp_stream& stream_;
  boost::beast::flat_buffer& buf_;
  http::request_parser<http::buffer_body>& parser_;
  uint64_t limit_;
  uint64_t received_ = 0;
  bool continued_ = false;
  std::string chunk_;
};
// `req` carries the head only (its body is empty).
using UploadHandler = std::function<asio::awaitable<Response>(const Request& req, BodyReader&)>;

// The head of a request as the server read it (its body still unread).
using HeadParser = http::request_parser<http::empty_body>;
// Takes over a connection whose request the host hook claimed: the head is
// read (in the parser), the body and anything later not; `buf` holds bytes
// read past the head. The connection is the handler's until it returns.
using HostHandler = std::function<asio::awaitable<void>(
    boost::beast::tcp_stream&, boost::beast::flat_buffer& buf, HeadParser& head)>;

struct ServerLimits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1 << 20;
  std::chrono::seconds idle_timeout{60};
  // Open connections at once, in all and from one peer address (TLS ones
  // by the address behind the TLS front, peerResolver): over either, a new
  // connection gets a 503 and is closed before anything of it is read.
  size_t max_connections = 4096;
  size_t max_connections_per_peer = 256;
};

// A JSON response; the body is serialized by the caller.
Response jsonResponse(const Request& req, http::status status, std::string body);
// {"code": ..., "message": ...} with the status that goes with `code`.
Response errorResponse(const Request& req, const Error& e);
// The same with a `details` object (e.g. the current state behind a 409).
Response errorResponse(const Request& req, const Error& e, const boost::json::object& details);
// 405 for a method `path` does not have, with `Allow` listing the ones it
// has (RFC 9110 15.5.6) and the usual Error body (code invalid_argument).
// `allow`: "GET, POST".
Response methodNotAllowed(const Request& req, std::string_view path, std::string_view allow);
// The credential of `Authorization: Bearer <token>` (at most 512 bytes in
// all), or nullopt when the header is missing or malformed. Every front end
// that takes a key or token authenticates from it.
std::optional<std::string_view> bearerToken(const Request& req);
// The one place an error Code becomes an HTTP status.
http::status statusForCode(Code c);

class HttpServer {
 public:
  HttpServer(asio::io_context& io, ServerLimits limits = {}) : io_(io), limits_(limits) {}
  // The route table every front end adds its routes to (http/router.h).
  Router& router() { return router_; }
  // A method and exact path (a pattern without parameters) to a handler.
  void route(http::verb method, std::string path, Handler h);
  // Requests served elsewhere (api/http_forward.h): `choose` sees each
  // request's head before any route; an Upstream forwards the request
  // there, body and response streamed; nullopt routes it here as usual. An
  // upstream that cannot be reached is a 502 (code unavailable).
  // `choose` may change the head (the forwarded request carries it).
  using ForwardChooser = std::function<std::optional<Upstream>(http::request_header<>&)>;
  void forwardWhen(ForwardChooser choose, ForwardLimits limits = {}) {
    forward_ = std::move(choose);
    forward_limits_ = limits;
  }
  // Requests whose Host `claims` accepts skip the routes: `take` gets the
  // connection (a sandbox's ports, ingress/proxy.h).
  void routeHosts(std::function<bool(std::string_view host)> claims, HostHandler take) {
    host_claims_ = std::move(claims);
    host_handler_ = std::move(take);
  }
  // Checks a request's head before any of its body is read (a token, a
  // signature): an answer refuses it and closes the connection, its body
  // unread; nullopt lets it on to its route. Asked only of requests that
  // carry a body and go to a route here (not forwarded, not a host's).
  using HeadCheck = std::function<std::optional<Response>(const http::request_header<>&)>;
  void checkHeads(HeadCheck check) { head_check_ = std::move(check); }
  // TLS (http/tls.h): connections whose first byte starts a TLS handshake
  // (0x16) go to `h` instead, TLS and plain HTTP on one port; with `only`,
  // every connection does but those the peerResolver names (the TLS
  // relay's own), and no plain HTTP is spoken to anyone else.
  void onTls(std::function<void(asio::ip::tcp::socket)> h, bool only = false) {
    tls_handoff_ = std::move(h);
    tls_only_ = only;
  }
  // Whether this listener speaks TLS only.
  bool tlsOnly() const { return tls_handoff_ && tls_only_; }
  // Who a connection's remote end stands for: a front that relays to this
  // listener over loopback (TLS) names the peer it relays for; nullopt is
  // the remote address itself.
  using PeerResolver =
      std::function<std::optional<asio::ip::address>(const asio::ip::tcp::endpoint& remote)>;
  void peerResolver(PeerResolver r) { peer_resolver_ = std::move(r); }
  // The peer a connection counts against (peerResolver applied).
  asio::ip::address peerOf(const asio::ip::tcp::socket& sock) const;
  // Connections open now (what the caps count).
  size_t connections() const { return open_; }
  // Counts requests (by method and status), their latency and error
  // responses (by code) in `r`, which must outlive the server.
  void setMetrics(metrics::Registry& r, std::string plane);
  // Binds (port 0 picks a free port) and starts accepting.
  Status listen(const HostPort& addr);
  uint16_t port() const { return port_; }
  // Where it listens (after listen()).
  asio::ip::tcp::endpoint localEndpoint() const;
  void close();

 private:
  asio::awaitable<void> acceptLoop();
  asio::awaitable<void> serve(asio::ip::tcp::socket sock);
  // One request's id and the route it took ("-": none; "forward").
  struct Served {
    std::string id;
    std::string route;
  };
  void count(const std::string& method, Response& res,
             std::chrono::steady_clock::time_point started, const Served& served);

  asio::io_context& io_;
  ServerLimits limits_;
  Router router_;
  ForwardChooser forward_;
  ForwardLimits forward_limits_;
  std::function<bool(std::string_view)> host_claims_;
  HostHandler host_handler_;
  std::function<void(asio::ip::tcp::socket)> tls_handoff_;
  bool tls_only_ = false;
  PeerResolver peer_resolver_;
  HeadCheck head_check_;
  size_t open_ = 0;
  std::map<asio::ip::address, size_t> per_peer_;
  std::unique_ptr<asio::ip::tcp::acceptor> acceptor_;
  uint16_t port_ = 0;
  std::string plane_;
  metrics::Family<metrics::Counter>* requests_ = nullptr;
  metrics::Family<metrics::Counter>* errors_ = nullptr;
  metrics::Family<metrics::Histogram>* latency_ = nullptr;
};

}  // namespace vessel::http
