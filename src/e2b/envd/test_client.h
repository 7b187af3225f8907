#pragma once
// A raw HTTP/1.1 client for envd's tests: one request per connection, read to
// EOF, chunked bodies de-chunked (and whether they ended cleanly).
#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "e2b/envd/connect.h"

namespace vessel::e2b::envd {

namespace asio = boost::asio;

struct Reply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;                            // de-chunked
  bool complete = true;                        // false: a chunked body cut short
};

// One request on its own connection, read to EOF.
inline asio::awaitable<Result<Reply>> request(uint16_t port, std::string head, std::string body) {
  auto ex = co_await asio::this_coro::executor;
  asio::ip::tcp::socket s(ex);
  auto [cec] = co_await s.async_connect({asio::ip::make_address("127.0.0.1"), port},
                                        asio::as_tuple(asio::use_awaitable));
  if (cec) co_return Error(Code::kUnavailable, "connect: " + cec.message());
  std::string req = head + "Content-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n\r\n" + body;
  auto [wec, wn] =
      co_await asio::async_write(s, asio::buffer(req), asio::as_tuple(asio::use_awaitable));
  if (wec) co_return Error(Code::kUnavailable, "write: " + wec.message());
  std::string raw;
  char buf[8192];
  for (;;) {
    auto [ec, n] =
        co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    raw.append(buf, n);
    if (ec) break;
  }
  Reply r;
  auto end = raw.find("\r\n\r\n");
  if (end == std::string::npos) co_return Error(Code::kProtocol, "no response head: " + raw);
  std::string h = raw.substr(0, end);
  r.status = std::stoi(h.substr(9, 3));
  size_t pos = h.find("\r\n");
  while (pos != std::string::npos) {
    size_t next = h.find("\r\n", pos + 2);
    std::string line =
        h.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
    auto colon = line.find(':');
    std::string name = line.substr(0, colon);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = line.substr(colon + 2);
    pos = next;
  }
  std::string rest = raw.substr(end + 4);
  if (r.headers["transfer-encoding"] == "chunked") {
    r.complete = false;
    size_t p = 0;
    for (;;) {
      size_t eol = rest.find("\r\n", p);
      if (eol == std::string::npos) break;
      size_t n = std::stoul(rest.substr(p, eol - p), nullptr, 16);
      if (n == 0) {
        r.complete = true;
        break;
      }
      if (eol + 2 + n > rest.size()) break;
      r.body += rest.substr(eol + 2, n);
      p = eol + 2 + n + 2;
    }
  } else {
    r.body = rest;
  }
  co_return r;
}

inline std::vector<Envelope> envelopes(const std::string& body) {
  EnvelopeDecoder d;
  EXPECT_TRUE(d.feed(body).ok());
  std::vector<Envelope> out;
  for (;;) {
    auto e = d.next();
    if (!e.ok() || !*e) break;
    out.push_back(std::move(**e));
  }
  return out;
}

}  // namespace vessel::e2b::envd
