#include "cluster/remote_node.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include "client/client.h"
#include "cluster/remote_node_internal.h"
#include "http/tls_client.h"

namespace vessel::cluster {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// The request out and the answer in, over the flight's stream (plain or
// TLS); the error names the step that failed.
template <class Stream>
asio::awaitable<Result<http::response<http::string_body>>> exchange(
    Stream& s, http::request<http::string_body>& req, size_t max_reply) {
  auto [wec, wn] = co_await http::async_write(s, req, asio::as_tuple(asio::use_awaitable));
  if (wec) co_return Error(Code::kUnavailable, "send: " + wec.message());
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_reply);
  auto [rdec, rn] = co_await http::async_read(s, buf, parser, asio::as_tuple(asio::use_awaitable));
  if (rdec) co_return Error(Code::kUnavailable, "receive: " + rdec.message());
  co_return parser.release();
}

}  // namespace

void RemoteNode::cancelAll(const std::string& why) {
  for (const auto& f : in_flight_) {
    f->cancelled = why;
    beast::error_code ec;
    f->stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    f->stream.cancel();
  }
  in_flight_.clear();
}

asio::awaitable<Result<std::shared_ptr<RemoteNode::Flight>>> RemoteNode::connect(
    const std::string& call, std::chrono::milliseconds timeout, bool* connected) {
  if (connected) *connected = false;
  auto fail = [&](const std::string& what) {
    return Error(Code::kUnavailable, "node " + name_ + " (" + url_ + "): " + call + ": " + what);
  };
  auto url = client::parseUrl(url_);
  if (!url.ok()) co_return fail(url.error().message());
  auto flight = std::make_shared<Flight>(io_);
  flight->url = *url;
  in_flight_.insert(flight);
  // Landed unless it is handed to the caller connected.
  struct Land {
    RemoteNode* self;
    std::shared_ptr<Flight> f;
    ~Land() {
      if (f) self->in_flight_.erase(f);
    }
  } land{this, flight};
  auto why = [&](const beast::error_code& ec) {
    return flight->cancelled.empty() ? ec.message() : flight->cancelled;
  };

  tcp::resolver resolver(io_);
  auto [rec, eps] = co_await resolver.async_resolve(url->host, std::to_string(url->port),
                                                    asio::as_tuple(asio::use_awaitable));
  if (rec) co_return fail("resolve: " + rec.message());
  if (!flight->cancelled.empty()) co_return fail(flight->cancelled);
  // Connecting is bounded on its own: a node whose link is down never
  // answers the SYN, and the caller may then try another node.
  flight->stream.expires_after(std::min(timeout, std::chrono::milliseconds(3000)));
  auto [cec, ep] = co_await flight->stream.async_connect(eps, asio::as_tuple(asio::use_awaitable));
  if (cec) co_return fail("connect: " + why(cec));
  if (url->tls) {
    if (!tls_) co_return fail("an https:// node and no TLS client (--node-ca-file)");
    flight->tls = std::make_unique<asio::ssl::stream<beast::tcp_stream&>>(flight->stream, *tls_);
    vessel::http::expectServer(flight->tls->native_handle(), url->host);
    auto [hec] = co_await flight->tls->async_handshake(asio::ssl::stream_base::client,
                                                       asio::as_tuple(asio::use_awaitable));
    // Refused before a byte of the request: it certainly did not reach
    // the node, and another may be tried.
    if (hec)
      co_return fail("TLS: " + (flight->cancelled.empty() ? vessel::http::handshakeError(
                                                                flight->tls->native_handle(), hec)
                                                          : flight->cancelled));
  }
  if (connected) *connected = true;
  flight->stream.expires_after(timeout);
  land.f.reset();
  co_return flight;
}

void RemoteNode::land(const std::shared_ptr<Flight>& f) { in_flight_.erase(f); }

asio::awaitable<Result<NodeReply>> RemoteNode::call(std::string call, NodeCall c,
                                                    std::chrono::milliseconds timeout,
                                                    bool* connected, size_t max_reply) {
  auto fail = [&](const std::string& what) {
    return Error(Code::kUnavailable, "node " + name_ + " (" + url_ + "): " + call + ": " + what);
  };
  auto connecting = connect(call, timeout, connected);
  auto made = co_await std::move(connecting);
  if (!made.ok()) co_return std::move(made).error();
  std::shared_ptr<Flight> flight = std::move(*made);
  struct Done {
    RemoteNode* self;
    std::shared_ptr<Flight> f;
    ~Done() { self->land(f); }
  } done{this, flight};
  const client::Url* url = &flight->url;

  http::request<http::string_body> req{http::verb::post, url->base_path + "/node/v1/" + call, 11};
  req.set(http::field::host, url->host);
  req.set(http::field::authorization, "Bearer " + token_);
  req.set(http::field::content_type, "application/json");
  req.body() = serializeNodeCall(c);
  req.prepare_payload();
  // g++ 12: no co_await in a conditional expression, see CONTRIBUTING.md rule 3.
  std::optional<Result<http::response<http::string_body>>> got;
  if (flight->tls)
    got.emplace(co_await exchange(*flight->tls, req, max_reply));
  else
    got.emplace(co_await exchange(flight->stream, req, max_reply));
  if (!got->ok())
    co_return fail(flight->cancelled.empty() ? got->error().message() : flight->cancelled);
  beast::error_code ignored;
  flight->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  auto res = std::move(**got);
  if (res.result() != http::status::ok) {
    client::HttpResponse hr{res.result_int(), "", res.body()};
    co_return client::errorFromResponse(hr).withContext("node " + name_ + ": " + call);
  }
  auto r = parseNodeReply(res.body());
  if (!r.ok()) co_return std::move(r).error().withContext("node " + name_);
  co_return r;
}

}  // namespace vessel::cluster
