#pragma once
// Request/response relays for HTTP/1.1 connections the gateway can read
// (plaintext, or TLS it terminated). Every request head is parsed strictly
// and its Host must equal the name pinned when the connection was decided;
// bodies are followed by their framing so the next head is found exactly
// where the upstream will find it. Templates over the stream type so the
// same code serves tcp::socket and ssl::stream.
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <functional>
#include <optional>
#include <string>

#include "gateway/credentials/scrubber.h"
#include "gateway/http/request_head.h"
#include "gateway/policy/policy.h"

namespace vessel::gateway {

struct RequestRules {
  std::string pinned_name;
  uint16_t port = 0;
  const policy::Credential* credential = nullptr;     // inject (terminated TLS only)
  std::function<void(std::string_view reason)> deny;  // logs, then resets both sides
  std::function<void()> on_end;  // the request side is finished (half-close upstream)
};

template <class Guest, class Up>
boost::asio::awaitable<void> relayRequests(Guest& guest, Up& up, std::string buf,
                                           RequestRules rules) {
  namespace asio = boost::asio;
  constexpr auto tok = asio::as_tuple(asio::use_awaitable);
  struct OnEnd {
    std::function<void()>& f;
    ~OnEnd() {
      if (f) f();
    }
  } on_end{rules.on_end};
  std::array<char, 4096> chunk;
  auto readMore = [&]() -> asio::awaitable<bool> {
    auto [ec, n] = co_await guest.async_read_some(asio::buffer(chunk), tok);
    if (ec) co_return false;
    buf.append(chunk.data(), n);
    co_return true;
  };
  for (;;) {
    http::ParseResult r = http::parseRequestHead(buf);
    while (r.state == http::ParseResult::State::kNeedMore) {
      if (!co_await readMore()) co_return;
      r = http::parseRequestHead(buf);
    }
    if (r.state == http::ParseResult::State::kError) {
      rules.deny("bad-request:" + r.error);
      co_return;
    }
    http::RequestHead& h = r.head;
    if (h.authority.name != rules.pinned_name ||
        (h.authority.port && *h.authority.port != rules.port)) {
      rules.deny("host-mismatch:" + h.authority.name);
      co_return;
    }
    // A guest-side proxy token means nothing outside its own session.
    h.removeHeader("proxy-authorization");
    if (rules.credential) {
      h.removeHeader(rules.credential->header);
      h.headers.push_back({rules.credential->header, rules.credential->value});
    }
    std::string out = h.serialize();
    buf.erase(0, h.head_bytes);
    http::BodyTracker body(h);
    size_t used = body.consume(buf);
    out.append(buf, 0, used);
    buf.erase(0, used);
    for (;;) {
      auto [wec, wn] = co_await asio::async_write(up, asio::buffer(out), tok);
      if (wec) co_return;
      if (body.done()) break;
      if (body.failed()) {
        rules.deny("bad-chunked-body");
        co_return;
      }
      if (!co_await readMore()) co_return;
      used = body.consume(buf);
      if (body.failed()) {
        rules.deny("bad-chunked-body");
        co_return;
      }
      out.assign(buf, 0, used);
      buf.erase(0, used);
    }
    if (h.websocket_upgrade) {
      // After an upgrade the bytes are no longer HTTP; they still go only to
      // the pinned upstream.
      for (;;) {
        if (!buf.empty()) {
          auto [wec, wn] = co_await asio::async_write(up, asio::buffer(buf), tok);
          if (wec) co_return;
          buf.clear();
        }
        if (!co_await readMore()) co_return;
      }
    }
  }
}

template <class From, class To>
boost::asio::awaitable<void> relayResponses(From& from, To& to,
                                            std::optional<credentials::Scrubber> scrub,
                                            std::function<void()> on_end) {
  namespace asio = boost::asio;
  constexpr auto tok = asio::as_tuple(asio::use_awaitable);
  std::array<char, 16384> chunk;
  for (;;) {
    auto [ec, n] = co_await from.async_read_some(asio::buffer(chunk), tok);
    std::string out;
    if (ec) {
      if (scrub) out = scrub->flush();
    } else {
      out =
          scrub ? scrub->process(std::string_view(chunk.data(), n)) : std::string(chunk.data(), n);
    }
    if (!out.empty()) {
      auto [wec, wn] = co_await asio::async_write(to, asio::buffer(out), tok);
      if (wec) break;
    }
    if (ec) break;
  }
  on_end();
}

}  // namespace vessel::gateway
