#include "cluster/remote_node.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include "client/client.h"

namespace vessel::cluster {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct RemoteNode::Flight {
  explicit Flight(asio::io_context& io) : stream(io) {}
  beast::tcp_stream stream;
  std::string cancelled;  // why, once cancelAll cut it short
};

void RemoteNode::cancelAll(const std::string& why) {
  for (const auto& f : in_flight_) {
    f->cancelled = why;
    beast::error_code ec;
    f->stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    f->stream.cancel();
  }
  in_flight_.clear();
}

asio::awaitable<Result<NodeReply>> RemoteNode::call(std::string call, NodeCall c,
                                                    std::chrono::milliseconds timeout,
                                                    bool* connected) {
  if (connected) *connected = false;
  auto fail = [&](const std::string& what) {
    return Error(Code::kUnavailable, "node " + name_ + " (" + url_ + "): " + call + ": " + what);
  };
  auto url = client::parseUrl(url_);
  if (!url.ok()) co_return fail(url.error().message());
  auto flight = std::make_shared<Flight>(io_);
  in_flight_.insert(flight);
  struct Done {
    RemoteNode* self;
    std::shared_ptr<Flight> f;
    ~Done() { self->in_flight_.erase(f); }
  } done{this, flight};
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
  if (connected) *connected = true;
  flight->stream.expires_after(timeout);

  http::request<http::string_body> req{http::verb::post, url->base_path + "/node/v1/" + call, 11};
  req.set(http::field::host, url->host);
  req.set(http::field::authorization, "Bearer " + token_);
  req.set(http::field::content_type, "application/json");
  req.body() = serializeNodeCall(c);
  req.prepare_payload();
  auto [wec, wn] =
      co_await http::async_write(flight->stream, req, asio::as_tuple(asio::use_awaitable));
  if (wec) co_return fail("send: " + why(wec));
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1 << 20);
  auto [rdec, rn] =
      co_await http::async_read(flight->stream, buf, parser, asio::as_tuple(asio::use_awaitable));
  if (rdec) co_return fail("receive: " + why(rdec));
  beast::error_code ignored;
  flight->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  auto res = parser.release();
  if (res.result() != http::status::ok) {
    client::HttpResponse hr{res.result_int(), "", res.body()};
    co_return client::errorFromResponse(hr).withContext("node " + name_ + ": " + call);
  }
  auto r = parseNodeReply(res.body());
  if (!r.ok()) co_return std::move(r).error().withContext("node " + name_);
  co_return r;
}

}  // namespace vessel::cluster
