#pragma once
// Forwarding HTTP/1.1 requests to another server: the core of a reverse
// proxy, for a listener that serves some requests from elsewhere (an API
// replica's envd listener sends each request to the node running its
// sandbox; HttpServer::forwardWhen). The request head has been read, bounded,
// by the server; the upstream is chosen from it; then the request body and
// the response are relayed in chunks in each direction, never whole, so a
// Connect server stream (a long chunked response) or a large upload passes
// with bounded memory.
//
// A client connection may carry requests for different upstreams one after
// another (keep-alive): each is forwarded on its own, and the connection to
// an upstream is kept for the next request going to the same one. When the
// upstream's connection breaks in the middle of a response, the client's is
// cut as well (its body never ends cleanly): the client sees what it would
// have seen talking to the upstream itself.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "http/names.h"

namespace vessel::http {

// Where a request goes: a host (IPv4 address or name) and port, in plain
// HTTP or over TLS.
struct Upstream {
  std::string host;
  uint16_t port = 0;
  bool tls = false;
  bool operator==(const Upstream&) const = default;
  std::string str() const {
    return (tls ? "https://" : "http://") + host + ":" + std::to_string(port);
  }
};
// "http://host:port" or "https://host:port" (a trailing path is ignored;
// the port defaults to 80 and 443).
Result<Upstream> upstreamFromUrl(std::string_view url);

struct ForwardLimits {
  size_t max_response_header_bytes = 64 * 1024;
  std::chrono::seconds connect_timeout{5};
  // https:// upstreams are verified with this client context
  // (http/tls_client.h); without one they are refused.
  std::shared_ptr<boost::asio::ssl::context> tls;
};

// One client connection's connection to its current upstream, kept between
// its requests while they go to the same one.
class UpstreamConnection {
 public:
  explicit UpstreamConnection(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}
  ~UpstreamConnection() { close(); }
  UpstreamConnection(const UpstreamConnection&) = delete;
  UpstreamConnection& operator=(const UpstreamConnection&) = delete;
  // Connected to `to` (reusing the open connection when it still is),
  // its TLS handshake done when `to` is https.
  boost::asio::awaitable<Status> ensure(const Upstream& to, const ForwardLimits& limits);
  void close();
  using TlsStream = boost::asio::ssl::stream<boost::beast::tcp_stream&>;
  // The TLS stream over stream() for an https upstream, else null.
  TlsStream* tls() { return tls_.get(); }
  boost::beast::tcp_stream& stream() { return *stream_; }
  boost::beast::flat_buffer& buffer() { return buf_; }

 private:
  boost::asio::any_io_executor ex_;
  std::optional<boost::beast::tcp_stream> stream_;
  std::unique_ptr<TlsStream> tls_;  // over *stream_; reset first
  std::optional<Upstream> at_;
  boost::beast::flat_buffer buf_;
};

struct Forwarded {
  unsigned status = 0;      // the upstream's answer (0: none came)
  bool keep_alive = false;  // the client connection may carry the next request
};

// Forwards the request whose head `head` was read from `client` (its body,
// if any, not yet: `client_buf` holds whatever was read past the head) to
// `to` over `up`, and relays the response. An Error means nothing was
// written to the client and the upstream could not be reached: the caller
// answers, then closes (the request's body is still unread). Otherwise the
// response has been relayed, or cut when either side broke (then
// keep_alive is false).
boost::asio::awaitable<Result<Forwarded>> forwardRequest(
    boost::beast::tcp_stream& client, boost::beast::flat_buffer& client_buf,
    boost::beast::http::request_parser<boost::beast::http::empty_body>& head, const Upstream& to,
    UpstreamConnection& up, const ForwardLimits& limits = {});

}  // namespace vessel::http
