#pragma once
// Request/response relays for HTTP/1.1 connections the gateway can read
// (plaintext, or TLS it terminated). Every request head is parsed strictly
// and its Host must equal the name pinned when the connection was decided;
// bodies are followed by their framing so the next head is found exactly
// where the upstream will find it. Responses are parsed too, so the two
// directions stay in step:
//  * only a 101 answering a well-formed upgrade request turns the
//    connection into opaque bytes; until then (and after any other answer)
//    the guest's bytes are requests and are checked as such;
//  * an `Expect: 100-continue` body is held until the upstream says 100;
//    a final response that arrives while its request's body is unfinished
//    ends the connection once relayed, so no later request can become part
//    of that body on either side;
//  * on credentialed connections the body is de-chunked and scrubbed as one
//    stream (re-chunked for the guest), heads and trailers too, and the
//    guest cannot choose a content encoding the scrubber cannot read.
// Templates over the stream type so the same code serves tcp::socket and
// ssl::stream.
#include <fmt/format.h>

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "gateway/credentials/scrubber.h"
#include "gateway/http/request_head.h"
#include "gateway/http/response_head.h"
#include "gateway/policy/policy.h"

namespace vessel::gateway {

struct RequestRules {
  std::string pinned_name;
  uint16_t port = 0;
  const policy::Credential* credential = nullptr;     // inject (terminated TLS only)
  std::function<void(std::string_view reason)> deny;  // logs, then resets both sides
  std::function<void()> on_end;  // the request side is finished (half-close upstream)
  std::function<void(std::string_view reason)> note;             // logs a deny verdict, no reset
  std::chrono::steady_clock::time_point* last_active = nullptr;  // the idle clock
};

// What one direction tells the other. Both run on one thread.
class RelayState {
 public:
  explicit RelayState(boost::asio::any_io_executor ex) : wake_(ex) {}
  struct Pending {
    std::string method;
    bool upgrade = false;  // a well-formed upgrade request
  };
  std::deque<Pending> pending;  // forwarded requests not yet finally answered
  bool body_open = false;       // the newest request's body is still being sent
  bool continue_seen = false;   // a 100 arrived for the newest request
  enum class Upgrade { kNone, kWaiting, kSwitched, kRefused } upgrade = Upgrade::kNone;
  bool closing = false;  // the response side ended the connection
  std::chrono::steady_clock::time_point* last_active = nullptr;
  void touch() {
    if (last_active) *last_active = std::chrono::steady_clock::now();
  }

  // Request side: waits until notify() or `limit` passes.
  boost::asio::awaitable<void> wait(std::chrono::milliseconds limit) {
    wake_.expires_after(limit);
    co_await wake_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
  }
  void notify() { wake_.cancel(); }

 private:
  boost::asio::steady_timer wake_;
};

inline constexpr std::chrono::milliseconds kContinueWait{1000};
inline constexpr std::chrono::hours kForever{24 * 365};

// Runs both directions of one relayed connection. It is over when the
// response side is (upstream closed, an early answer relayed, or a reset):
// the request side, done or not, is then cancelled.
template <class Guest, class Up, class GuestSocket>
boost::asio::awaitable<void> relayHttp(Guest& guest, Up& up, GuestSocket& guest_sock,
                                       std::string first, RequestRules rules,
                                       std::optional<std::vector<std::string>> secrets);

// Relays the guest's requests, one head at a time, each decided before a
// byte goes upstream. Long because the loop keeps one request's state
// (head, body framing, early answer) in view from read to write.
template <class Guest, class Up>
boost::asio::awaitable<void> relayRequests(Guest& guest, Up& up, std::string buf,
                                           RequestRules rules, RelayState& st) {
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
    if (ec || st.closing) co_return false;
    st.touch();
    buf.append(chunk.data(), n);
    co_return true;
  };
  auto send = [&](const std::string& out) -> asio::awaitable<bool> {
    if (st.closing) co_return false;
    auto [wec, wn] = co_await asio::async_write(up, asio::buffer(out), tok);
    co_return !wec && !st.closing;
  };
  for (;;) {
    http::ParseResult r = http::parseRequestHead(buf);
    while (r.state == http::ParseResult::State::kNeedMore) {
      if (!co_await readMore()) co_return;
      r = http::parseRequestHead(buf);
    }
    if (st.closing) co_return;
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
    // An Upgrade without "Connection: upgrade" is not an upgrade; remove it
    // so no upstream switches protocols behind the gateway's back.
    bool upgrade = h.upgradeWellFormed();
    if (!upgrade) h.removeHeader("upgrade");
    if (rules.credential) {
      h.removeHeader(rules.credential->header);
      h.headers.push_back({rules.credential->header, rules.credential->value});
      // The scrubber reads the response as sent: no compression.
      h.removeHeader("accept-encoding");
      h.headers.push_back({"accept-encoding", "identity"});
    }
    std::string out = h.serialize();
    buf.erase(0, h.head_bytes);
    http::BodyTracker body(h);
    st.pending.push_back({h.method, upgrade});
    st.body_open = !body.done();
    st.continue_seen = false;
    if (!co_await send(out)) co_return;
    if (h.expect_continue && !st.continue_seen && !st.closing) {
      // Hold the body until the upstream asks for it (or has answered, and
      // the connection ends); a server that never sends 100 gets it after
      // the same pause a client would make.
      co_await st.wait(kContinueWait);
    }
    if (st.closing) co_return;
    while (!body.done()) {
      size_t used = body.consume(buf);
      if (body.failed()) {
        rules.deny("bad-request:" + body.error());
        co_return;
      }
      out.assign(buf, 0, used);
      buf.erase(0, used);
      if (!out.empty() && !co_await send(out)) co_return;
      if (!body.done() && !co_await readMore()) co_return;
    }
    st.body_open = false;
    if (upgrade) {
      st.upgrade = RelayState::Upgrade::kWaiting;
      while (st.upgrade == RelayState::Upgrade::kWaiting && !st.closing) {
        co_await st.wait(kForever);
      }
      if (st.closing) co_return;
      if (st.upgrade == RelayState::Upgrade::kSwitched) {
        // The upstream agreed: the bytes are no longer HTTP; they still go
        // only to the pinned upstream.
        for (;;) {
          if (!buf.empty()) {
            if (!co_await send(buf)) co_return;
            buf.clear();
          }
          if (!co_await readMore()) co_return;
        }
      }
      st.upgrade = RelayState::Upgrade::kNone;  // refused: still requests
    }
  }
}

// Relays responses; returns when the connection is over (upstream closed,
// an early answer was relayed, or an error). `deny` logs and resets.
// Long because the loop keeps one response's state (interim answers,
// framing, an upgrade's 101) in view from head to body.
template <class From, class To>
boost::asio::awaitable<void> relayResponses(From& from, To& to,
                                            std::optional<std::vector<std::string>> secrets,
                                            std::function<void(std::string_view)> deny,
                                            std::function<void(std::string_view)> note,
                                            RelayState& st) {
  namespace asio = boost::asio;
  constexpr auto tok = asio::as_tuple(asio::use_awaitable);
  std::array<char, 16384> chunk;
  std::string buf;
  bool eof = false;
  struct Close {
    RelayState& st;
    ~Close() {
      st.closing = true;
      st.notify();
    }
  } close{st};
  auto readMore = [&]() -> asio::awaitable<bool> {
    auto [ec, n] = co_await from.async_read_some(asio::buffer(chunk), tok);
    if (ec) {
      eof = true;
      co_return false;
    }
    st.touch();
    buf.append(chunk.data(), n);
    co_return true;
  };
  auto send = [&](const std::string& out) -> asio::awaitable<bool> {
    if (out.empty()) co_return true;
    auto [wec, wn] = co_await asio::async_write(to, asio::buffer(out), tok);
    co_return !wec;
  };
  auto scrubAll = [&](std::string_view s) {
    credentials::Scrubber one(*secrets);
    return one.process(s) + one.flush();
  };
  for (;;) {
    std::string method = st.pending.empty() ? "GET" : st.pending.front().method;
    http::ResponseParse r = http::parseResponseHead(buf, method);
    while (r.state == http::ResponseParse::State::kNeedMore) {
      if (!co_await readMore()) co_return;
      r = http::parseResponseHead(buf, method);
    }
    if (r.state == http::ResponseParse::State::kError) {
      deny("bad-response:" + r.error);
      co_return;
    }
    const http::ResponseHead& h = r.head;
    std::string head = buf.substr(0, h.head_bytes);
    buf.erase(0, h.head_bytes);
    if (secrets) {
      if (!h.content_encoding.empty()) {
        deny("encoded-response:" + h.content_encoding);
        co_return;
      }
      head = scrubAll(head);
    }
    // Nothing asked for it (e.g. a 408 before closing): relay it, then end.
    bool unsolicited = st.pending.empty();
    if (h.status == 101) {
      if (unsolicited || !st.pending.front().upgrade || !h.upgrade_websocket ||
          !h.connection_upgrade) {
        deny("bad-upgrade-response");
        co_return;
      }
      if (!co_await send(head)) co_return;
      st.upgrade = RelayState::Upgrade::kSwitched;
      st.notify();
      std::optional<credentials::Scrubber> scrub;
      if (secrets) scrub.emplace(*secrets);
      for (;;) {
        std::string out = scrub ? scrub->process(buf) : std::move(buf);
        buf.clear();
        if (!co_await send(out)) co_return;
        if (!co_await readMore()) break;
      }
      if (scrub) co_await send(scrub->flush());
      co_return;
    }
    if (h.interim()) {
      if (!co_await send(head)) co_return;
      if (h.status == 100) {
        st.continue_seen = true;
        st.notify();
      }
      continue;
    }
    // A final answer to the newest request while its body is still coming:
    // whatever the guest sends next must not reach the upstream (it would be
    // body to one side and a request to the other).
    bool early = st.body_open && st.pending.size() == 1;
    if (!unsolicited) {
      bool was_upgrade = st.pending.front().upgrade;
      st.pending.pop_front();
      if (was_upgrade) {
        st.upgrade = RelayState::Upgrade::kRefused;
        st.notify();
      }
    }
    if (early || unsolicited) {
      st.closing = true;
      st.notify();
      note(early ? "early-response" : "unsolicited-response");
    }
    if (!co_await send(head)) co_return;
    http::BodyTracker body(h.body, h.content_length);
    std::optional<credentials::Scrubber> scrub;
    if (secrets) scrub.emplace(*secrets);
    bool chunked = h.body == http::BodyKind::kChunked;
    while (!body.done()) {
      std::string out, payload;
      size_t used = body.consume(buf, scrub ? &payload : nullptr);
      if (body.failed()) {
        deny("bad-response:" + body.error());
        co_return;
      }
      if (!scrub) {
        out = buf.substr(0, used);
      } else {
        // De-chunked and scrubbed as one stream, so a secret split across
        // chunks is still found; sent again in chunks of our own.
        std::string clean = scrub->process(payload);
        if (body.done()) clean += scrub->flush();
        if (!chunked) {
          out = std::move(clean);
        } else {
          if (!clean.empty()) out = fmt::format("{:x}\r\n{}\r\n", clean.size(), clean);
          if (body.done()) out += "0\r\n" + scrubAll(body.trailers()) + "\r\n";
        }
      }
      buf.erase(0, used);
      if (!co_await send(out)) co_return;
      if (body.done()) break;
      if (!co_await readMore()) {
        // Close-delimited bodies end here; anything else was cut short.
        if (h.body == http::BodyKind::kUntilClose && scrub) co_await send(scrub->flush());
        co_return;
      }
    }
    if (early || unsolicited) co_return;
  }
}

template <class Guest, class Up, class GuestSocket>
boost::asio::awaitable<void> relayHttp(Guest& guest, Up& up, GuestSocket& guest_sock,
                                       std::string first, RequestRules rules,
                                       std::optional<std::vector<std::string>> secrets) {
  namespace asio = boost::asio;
  using namespace asio::experimental::awaitable_operators;
  auto ex = co_await asio::this_coro::executor;
  RelayState st(ex);
  st.last_active = rules.last_active;
  auto deny = rules.deny;
  auto note = rules.note;
  auto requests = [&]() -> asio::awaitable<void> {
    co_await relayRequests(guest, up, std::move(first), std::move(rules), st);
    asio::steady_timer park(ex, kForever);
    co_await park.async_wait(asio::as_tuple(asio::use_awaitable));
  };
  auto responses = [&]() -> asio::awaitable<void> {
    co_await relayResponses(up, guest, std::move(secrets), deny, note, st);
    boost::system::error_code ec;
    guest_sock.shutdown(asio::socket_base::shutdown_send, ec);
  };
  co_await (responses() || requests());
}

}  // namespace vessel::gateway
