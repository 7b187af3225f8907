// One guest TCP connection: classify the first bytes, decide, resolve, dial,
// then splice (TLS without a credential, opaque full-mode flows), relay with
// a per-request Host check (plaintext HTTP), or terminate and inject
// (credentialed or inspected TLS, terminate.cc).
#include <netinet/in.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "gateway/flow.h"
#include "gateway/gateway.h"
#include "gateway/http/request_head.h"
#include "gateway/http_relay.h"
#include "gateway/name.h"
#include "gateway/policy/decision.h"
#include "gateway/tls/client_hello.h"

namespace vessel::gateway {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kTok = asio::as_tuple(asio::use_awaitable);
// From <linux/netfilter_ipv4.h>, which clashes with <netinet/in.h>.
constexpr int kSoOriginalDst = 80;
constexpr size_t kClassifyCap = tls::kMaxHelloBytes + 16 * 1024 + 64;

std::optional<tcp::endpoint> originalDestination(tcp::socket& s) {
  sockaddr_in sin{};
  socklen_t len = sizeof sin;
  // REDIRECT in this namespace rewrote the destination; conntrack keeps the
  // original. Only its port feeds a decision; its address is logged.
  if (::getsockopt(s.native_handle(), SOL_IP, kSoOriginalDst, &sin, &len) != 0) {
    return std::nullopt;
  }
  return tcp::endpoint(asio::ip::address_v4(ntohl(sin.sin_addr.s_addr)), ntohs(sin.sin_port));
}

bool looksLikeHttp(char c) { return c >= 'A' && c <= 'Z'; }

}  // namespace

void resetSocket(tcp::socket& s) {
  boost::system::error_code ec;
  if (!s.is_open()) return;
  s.set_option(asio::socket_base::linger(true, 0), ec);  // RST, not FIN
  s.close(ec);
}

void Gateway::deny(const Flow& f, std::string_view reason) {
  registry_.record({"tcp", f.sandbox, f.name, f.address, f.port, false, reason});
}

asio::awaitable<void> Gateway::handleConn(tcp::socket guest) {
  Flow f;
  boost::system::error_code ec;
  auto peer = guest.remote_endpoint(ec);
  if (ec) co_return;
  Sandbox* sb = registry_.bySource(peer.address());
  if (!sb) {
    f.sandbox = "?" + peer.address().to_string();
    deny(f, "unknown-source");
    resetSocket(guest);
    co_return;
  }
  f.sandbox = sb->id;
  if (std::string why = admitFlow(f.sandbox); !why.empty()) {
    deny(f, why);
    resetSocket(guest);
    co_return;
  }
  struct FlowSlot {
    std::map<std::string, Budget>& budgets;
    std::string id;
    ~FlowSlot() {
      auto it = budgets.find(id);
      if (it != budgets.end() && it->second.flows > 0) --it->second.flows;
    }
  } flow_slot{budgets_, f.sandbox};
  auto orig = originalDestination(guest);
  if (!orig) {
    deny(f, "no-original-destination");
    resetSocket(guest);
    co_return;
  }
  f.port = orig->port();
  f.guest_address = orig->address().to_string();
  policy::Mode mode = sb->policy.mode;
  // An address rule covering the destination (or full mode) lets a flow go
  // there without a name: wait for first bytes only as long as full mode does.
  bool unnamed_ok =
      mode == policy::Mode::kFull || sb->policy.allowsAddress(orig->address(), f.port);
  if (mode == policy::Mode::kNone) {
    deny(f, "mode-none");
    resetSocket(guest);
    co_return;
  }

  // Classify: read until the ClientHello or request head is whole, bounded
  // in bytes and time.
  guest.non_blocking(true, ec);
  std::string first;
  tls::ClientHelloParser hello;
  http::ParseResult head;
  enum class Kind { kUnknown, kTls, kHttp, kOpaque } kind = Kind::kUnknown;
  bool timed_out = false;
  asio::steady_timer timer(io_, unnamed_ok ? cfg_.full_mode_first_bytes : cfg_.classify_timeout);
  for (;;) {
    auto r = co_await (guest.async_wait(tcp::socket::wait_read, kTok) || timer.async_wait(kTok));
    if (r.index() == 1) {
      timed_out = true;
      break;
    }
    size_t n = guest.read_some(asio::buffer(relay_buf_), ec);
    if (ec == asio::error::would_block) continue;
    if (ec || n == 0) co_return;  // guest went away before saying anything useful
    std::string_view chunk(relay_buf_.data(), n);
    first.append(chunk);
    if (kind == Kind::kUnknown) {
      kind = tls::ClientHelloParser::looksLikeTls(static_cast<uint8_t>(first[0])) ? Kind::kTls
             : looksLikeHttp(first[0])                                            ? Kind::kHttp
                                                                                  : Kind::kOpaque;
    }
    if (kind == Kind::kTls) {
      if (hello.feed(chunk) != tls::ClientHelloParser::State::kNeedMore) break;
    } else if (kind == Kind::kHttp) {
      head = http::parseRequestHead(first);
      if (head.state != http::ParseResult::State::kNeedMore) break;
    } else {
      break;
    }
    if (first.size() > kClassifyCap) break;
  }

  // Re-read the policy: it may have changed while we waited.
  sb = registry_.byId(f.sandbox);
  if (!sb) co_return;
  const policy::Policy& p = sb->policy;
  unnamed_ok = p.mode == policy::Mode::kFull || p.allowsAddress(orig->address(), f.port);
  std::optional<policy::Credential> cred;
  bool terminate_tls = false;
  bool dial_original = false;
  if (kind == Kind::kTls && hello.state() == tls::ClientHelloParser::State::kDone) {
    const auto& names = hello.hello().server_names;
    if (names.size() != 1) {
      if (!unnamed_ok || !names.empty()) {
        deny(f, names.empty() ? "no-sni" : "multiple-sni");
        resetSocket(guest);
        co_return;
      }
      dial_original = true;
    } else if (hello.hello().has_ech && p.mode != policy::Mode::kFull) {
      if (!unnamed_ok) {
        deny(f, "ech");
        resetSocket(guest);
        co_return;
      }
      dial_original = true;  // the name is hidden; an address rule covers where it goes
    } else {
      auto n = normalizeName(names[0]);
      if (!n.ok()) {
        deny(f, "bad-sni");
        resetSocket(guest);
        co_return;
      }
      f.name = std::move(*n);
      // Credentials are injected on 443; inspection applies on every port
      // its rule names.
      if (f.port == 443)
        if (const auto* c = p.credentialFor(f.name)) cred = *c;
      terminate_tls = cred.has_value() || p.inspects(f.name, f.port);
    }
  } else if (kind == Kind::kHttp && head.state == http::ParseResult::State::kDone) {
    f.name = head.head.authority.name;
    if (head.head.authority.port && *head.head.authority.port != f.port) {
      deny(f, "host-port-mismatch");
      resetSocket(guest);
      co_return;
    }
  } else if (unnamed_ok) {
    // Full mode or an address rule: whatever cannot be named goes to where
    // the guest sent it, still subject to the inward-address refusal below.
    dial_original = true;
  } else {
    std::string reason = timed_out             ? "classify-timeout"
                         : kind == Kind::kTls  ? "bad-client-hello"
                         : kind == Kind::kHttp ? "bad-request"
                                               : "unparseable";
    deny(f, reason);
    resetSocket(guest);
    co_return;
  }

  // policy/decision.h: by name (the gateway's own resolution), or to the
  // guest's destination (nothing to name the flow by, or a name no rule
  // allows sent to an address a rule does); inward addresses stay refused.
  policy::Decision d =
      policy::decide(p, classifier_, dial_original ? "" : f.name, orig->address(), f.port);
  if (d.route == policy::Route::kRefuse) {
    if (d.reason != "policy") f.address = orig->address().to_string();
    deny(f, d.reason.empty() ? "policy" : d.reason);
    resetSocket(guest);
    co_return;
  }
  if (d.route == policy::Route::kByAddress && !dial_original) {
    // Named, but only the address is allowed: the name decides nothing, so
    // no credential and no inspection.
    dial_original = true;
    cred.reset();
    terminate_tls = false;
  }
  std::optional<tcp::socket> up;
  auto dialled = orig->address();
  if (dial_original) {
    up = co_await dialEndpoint(f, *orig);
  } else {
    up = co_await dial(f, f.name);
    if (up) dialled = up->remote_endpoint(ec).address();
  }
  if (!up) {
    resetSocket(guest);
    co_return;
  }
  // The policy may have changed during resolve and connect.
  sb = registry_.byId(f.sandbox);
  if (!sb ||
      !policy::permits(sb->policy, dial_original ? "" : f.name, dialled, f.port, dial_original)) {
    deny(f, "policy-changed");
    resetSocket(guest);
    co_return;
  }
  auto handle = std::make_shared<ConnHandle>();
  handle->name = dial_original ? "" : f.name;
  handle->port = f.port;
  handle->address = dialled;
  handle->by_address = dial_original;
  handle->terminated = terminate_tls;
  if (cred) handle->credential = cred->value;
  tcp::socket* g = &guest;
  tcp::socket* u = &*up;
  handle->reset = [g, u] {
    resetSocket(*g);
    resetSocket(*u);
  };
  registry_.track(*sb, handle);
  // A flow to the guest's destination is opaque bytes to that address: no
  // Host pin (the address, not a name, is what was allowed).
  bool http = kind == Kind::kHttp && !dial_original;
  registry_.record({"tcp", f.sandbox, f.name, f.address, f.port, true,
                    terminate_tls ? "terminate" : (http ? "http" : "splice")});

  if (terminate_tls) {
    co_await terminate(f, guest, *up, std::move(first), std::move(cred), &handle->last_active);
  } else if (http) {
    co_await httpPlain(f, guest, *up, std::move(first), &handle->last_active);
  } else {
    auto [wec, wn] = co_await asio::async_write(*up, asio::buffer(first), kTok);
    if (!wec) {
      first = std::string();  // release the classification buffer before idling
      co_await splice(guest, *up, &handle->last_active);
    }
  }
  resetSocket(guest);
  resetSocket(*up);
}

asio::awaitable<std::optional<tcp::socket>> Gateway::dial(Flow& f, const std::string& name) {
  auto records = co_await resolver_->resolve(name, f.sandbox);
  if (!records.ok()) {
    deny(f, "resolve-failed:" + records.error().message());
    co_return std::nullopt;
  }
  // Every answer is classified; one inward (or denied) answer refuses the
  // name (a rebinding resolver would otherwise win on a retry). The policy
  // is read again: it may have changed while resolving.
  Sandbox* sb = registry_.byId(f.sandbox);
  if (!sb) co_return std::nullopt;
  for (const auto& r : *records) {
    if (std::string why = policy::refuseAnswer(sb->policy, classifier_, r.address, f.port);
        !why.empty()) {
      f.address = r.address.to_string();
      deny(f, why);
      co_return std::nullopt;
    }
  }
  for (const auto& r : *records) {
    f.address = r.address.to_string();
    auto s = co_await dialEndpoint(f, tcp::endpoint(r.address, f.port));
    if (s) co_return s;
  }
  co_return std::nullopt;
}

asio::awaitable<std::optional<tcp::socket>> Gateway::dialEndpoint(Flow& f, tcp::endpoint ep) {
  f.address = ep.address().to_string();
  tcp::socket s(io_);
  asio::steady_timer timer(io_, cfg_.connect_timeout);
  auto r = co_await (s.async_connect(ep, kTok) || timer.async_wait(kTok));
  if (r.index() == 1) {
    deny(f, "connect-timeout");
    co_return std::nullopt;
  }
  auto [ec] = std::get<0>(r);
  if (ec) {
    deny(f, "connect-failed:" + ec.message());
    co_return std::nullopt;
  }
  s.set_option(tcp::no_delay(true), ec);
  s.non_blocking(true, ec);
  co_return std::move(s);
}

asio::awaitable<void> Gateway::splice(tcp::socket& a, tcp::socket& b, TimePoint* last_active) {
  co_await (pump(a, b, last_active) && pump(b, a, last_active));
}

asio::awaitable<void> Gateway::pump(tcp::socket& from, tcp::socket& to, TimePoint* last_active) {
  boost::system::error_code ec;
  bool failed = false;
  while (!failed) {
    auto [wait_ec] = co_await from.async_wait(tcp::socket::wait_read, kTok);
    if (wait_ec) break;
    *last_active = std::chrono::steady_clock::now();
    // Drain what is readable before waiting again (bounded, so one busy flow
    // cannot starve the others on this thread).
    for (int burst = 0; burst < 16 && !failed; ++burst) {
      size_t n = from.read_some(asio::buffer(relay_buf_), ec);
      if (ec == asio::error::would_block) break;
      if (ec == asio::error::eof || (!ec && n == 0)) {
        to.shutdown(tcp::socket::shutdown_send, ec);  // pass the half-close on
        co_return;
      }
      size_t w = ec ? 0 : to.write_some(asio::buffer(relay_buf_.data(), n), ec);
      if (ec == asio::error::would_block) {
        w = 0;
        ec = {};
      }
      failed = static_cast<bool>(ec);
      if (!failed && w < n) {
        // Only a slow receiver costs per-connection memory, and only this much.
        std::string rest(relay_buf_.data() + w, n - w);
        auto [wec, wn] = co_await asio::async_write(to, asio::buffer(rest), kTok);
        failed = static_cast<bool>(wec);
        break;
      }
    }
  }
  // An error on either side ends both directions.
  resetSocket(from);
  resetSocket(to);
}

asio::awaitable<void> Gateway::httpPlain(Flow& f, tcp::socket& guest, tcp::socket& up,
                                         std::string first, TimePoint* last_active) {
  // Plaintext never carries a credential: only the Host pin is enforced.
  RequestRules rules{f.name,
                     f.port,
                     nullptr,
                     [this, &f, &guest, &up](std::string_view why) {
                       deny(f, why);
                       resetSocket(guest);
                       resetSocket(up);
                     },
                     [&up] {
                       boost::system::error_code ec;
                       up.shutdown(tcp::socket::shutdown_send, ec);
                     },
                     [this, &f](std::string_view why) { deny(f, why); },
                     last_active};
  co_await relayHttp(guest, up, guest, std::move(first), std::move(rules), std::nullopt);
}

}  // namespace vessel::gateway
