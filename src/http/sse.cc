#include "http/sse.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/write.hpp>

namespace vessel::http {

namespace beast = boost::beast;

asio::awaitable<bool> writeSseHead(beast::tcp_stream& stream, const Request& req) {
  http::response<http::empty_body> head{http::status::ok, req.version()};
  head.set(http::field::content_type, "text/event-stream");
  head.set(http::field::cache_control, "no-cache");
  head.set(http::field::server, "vessel");
  if (auto it = req.find("X-Request-Id"); it != req.end()) head.set("X-Request-Id", it->value());
  head.keep_alive(false);
  http::response_serializer<http::empty_body> sr(head);
  stream.expires_after(kSseWriteTimeout);
  auto [ec, n] = co_await http::async_write_header(stream, sr, asio::as_tuple(asio::use_awaitable));
  co_return !ec;
}

asio::awaitable<bool> writeAll(beast::tcp_stream& stream, std::string data) {
  stream.expires_after(kSseWriteTimeout);
  auto [ec, n] =
      co_await asio::async_write(stream, asio::buffer(data), asio::as_tuple(asio::use_awaitable));
  co_return !ec;
}

std::string sseFrame(std::string_view type, std::string_view data_json, int64_t id) {
  std::string s;
  s.reserve(type.size() + data_json.size() + 32);
  if (id >= 0) s += "id: " + std::to_string(id) + "\n";
  s += "event: ";
  s += type;
  s += "\ndata: ";
  s += data_json;
  s += "\n\n";
  return s;
}

void endStream(beast::tcp_stream& stream) {
  boost::system::error_code ec;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
}

}  // namespace vessel::http
