#include "http/stream.h"

#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_cat.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/write.hpp>

namespace vessel::http {

namespace beast = boost::beast;

asio::awaitable<bool> ChunkedWriter::head(http::response<http::empty_body> head) {
  head.chunked(true);
  http::response_serializer<http::empty_body> sr(head);
  s_.expires_after(timeout_);
  auto [ec, n] = co_await http::async_write_header(s_, sr, asio::as_tuple(asio::use_awaitable));
  co_return !ec;
}

asio::awaitable<bool> ChunkedWriter::chunk(std::string_view data) {
  if (data.empty()) co_return true;
  s_.expires_after(timeout_);
  auto body = http::make_chunk(asio::buffer(data.data(), data.size()));
  auto [ec, n] = co_await asio::async_write(s_, body, asio::as_tuple(asio::use_awaitable));
  co_return !ec;
}

asio::awaitable<bool> ChunkedWriter::last(std::string_view data) {
  s_.expires_after(timeout_);
  if (data.empty()) {
    auto end = http::make_chunk_last();
    auto [ec, n] = co_await asio::async_write(s_, end, asio::as_tuple(asio::use_awaitable));
    co_return !ec;
  }
  // One write: the client sees the response end with its last data.
  auto both = beast::buffers_cat(http::make_chunk(asio::buffer(data.data(), data.size())),
                                 http::make_chunk_last());
  auto [ec, n] = co_await asio::async_write(s_, both, asio::as_tuple(asio::use_awaitable));
  co_return !ec;
}

}  // namespace vessel::http
