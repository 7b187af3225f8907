#pragma once
// A small HTTP/1.1 server on Boost.Beast with C++20 coroutines: one
// coroutine per connection, keep-alive, and hard limits on header and body
// sizes and on idle time, since every caller is untrusted. Routes map a
// method and exact path to a handler; a prefix route takes every path under
// its prefix (the API parses ids out of it) and may write the response to
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

#include "api/http_forward.h"
#include "base/config.h"
#include "base/result.h"
#include "metrics/registry.h"

namespace vessel::api {

namespace asio = boost::asio;
namespace http = boost::beast::http;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
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
// The one place an error Code becomes an HTTP status.
http::status statusForCode(Code c);

class HttpServer {
 public:
  HttpServer(asio::io_context& io, ServerLimits limits = {}) : io_(io), limits_(limits) {}
  void route(http::verb method, std::string path, Handler h) {
    routes_[{method, std::move(path)}] = std::move(h);
  }
  // A method and exact path whose body the handler streams, up to
  // `max_body` bytes (the server's max_body_bytes does not apply).
  void routeUpload(http::verb method, std::string path, uint64_t max_body, UploadHandler h) {
    uploads_[{method, std::move(path)}] = {max_body, std::move(h)};
  }
  // Every path starting with `prefix` that no exact route takes, any method.
  void routePrefix(std::string prefix, StreamHandler h) {
    prefix_routes_.emplace_back(std::move(prefix), std::move(h));
  }
  // Requests served elsewhere (api/http_forward.h): `choose` sees each
  // request's head before any route; an Upstream forwards the request
  // there, body and response streamed; nullopt routes it here as usual. An
  // upstream that cannot be reached is a 502 (code unavailable).
  using ForwardChooser = std::function<std::optional<Upstream>(const http::request_header<>&)>;
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
  // Connections whose first byte starts a TLS handshake (0x16) go to `h`
  // instead: TLS and plain HTTP on one port.
  void onTls(std::function<void(asio::ip::tcp::socket)> h) { tls_handoff_ = std::move(h); }
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
  asio::awaitable<std::optional<Response>> dispatch(const Request& req,
                                                    boost::beast::tcp_stream& stream);
  void count(const std::string& method, const Response& res,
             std::chrono::steady_clock::time_point started);

  asio::io_context& io_;
  ServerLimits limits_;
  std::map<std::pair<http::verb, std::string>, Handler> routes_;
  std::vector<std::pair<std::string, StreamHandler>> prefix_routes_;
  std::map<std::pair<http::verb, std::string>, std::pair<uint64_t, UploadHandler>> uploads_;
  ForwardChooser forward_;
  ForwardLimits forward_limits_;
  std::function<bool(std::string_view)> host_claims_;
  HostHandler host_handler_;
  std::function<void(asio::ip::tcp::socket)> tls_handoff_;
  std::unique_ptr<asio::ip::tcp::acceptor> acceptor_;
  uint16_t port_ = 0;
  std::string plane_;
  metrics::Family<metrics::Counter>* requests_ = nullptr;
  metrics::Family<metrics::Counter>* errors_ = nullptr;
  metrics::Family<metrics::Histogram>* latency_ = nullptr;
};

}  // namespace vessel::api
