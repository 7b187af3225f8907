// One guest TCP connection: admit it (which sandbox, its budget, where the
// guest sent it), classify the first bytes (classify.h), decide (decide.h,
// pure), dial the gateway's own answer, re-check the policy, then relay:
// splice (TLS without a credential, opaque full-mode flows), a per-request
// Host check (plaintext HTTP), or terminate and inject (credentialed or
// inspected TLS, terminate.cc).
#include <netinet/in.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "gateway/classify.h"
#include "gateway/decide.h"
#include "gateway/flow.h"
#include "gateway/gateway.h"
#include "gateway/http_relay.h"
#include "gateway/policy/decision.h"

namespace vessel::gateway {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kTok = asio::as_tuple(asio::use_awaitable);
// From <linux/netfilter_ipv4.h>, which clashes with <netinet/in.h>.
constexpr int kSoOriginalDst = 80;

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
  if (sb->policy.mode == policy::Mode::kNone) {
    deny(f, "mode-none");  // before reading a byte
    resetSocket(guest);
    co_return;
  }

  // An address rule covering the destination (or full mode) lets a flow go
  // there without a name: wait for first bytes only as long as full mode does.
  const bool unnamed_ok =
      sb->policy.mode == policy::Mode::kFull || sb->policy.allowsAddress(orig->address(), f.port);
  auto first =
      co_await classify(guest, unnamed_ok ? cfg_.full_mode_first_bytes : cfg_.classify_timeout);
  if (!first) co_return;  // the guest went away before saying anything useful
  // Re-read the policy: it may have changed while we waited.
  sb = registry_.byId(f.sandbox);
  if (!sb) co_return;
  Verdict v = decide(*first, sb->policy, classifier_, orig->address(), f.port);
  f.name = v.name;
  if (v.action == Verdict::Action::kDeny) {
    // A refusal of where the guest sent it names that address in the log.
    if (v.reason.rfind("inward-destination:", 0) == 0 || v.reason == "denied-address")
      f.address = orig->address().to_string();
    deny(f, v.reason);
    resetSocket(guest);
    co_return;
  }
  std::optional<tcp::socket> up = co_await dialFor(f, v, *orig);
  if (!up) {
    resetSocket(guest);
    co_return;
  }
  const bool by_address = v.action == Verdict::Action::kDialOriginal;
  auto dialled = up->remote_endpoint(ec).address();
  if (ec) dialled = orig->address();
  // The policy may have changed during resolve and connect.
  sb = registry_.byId(f.sandbox);
  if (!sb || !policy::permits(sb->policy, by_address ? "" : f.name, dialled, f.port, by_address)) {
    deny(f, "policy-changed");
    resetSocket(guest);
    co_return;
  }
  co_await relay(f, *sb, guest, *up, std::move(first->bytes), std::move(v), dialled);
  resetSocket(guest);
  resetSocket(*up);
}

asio::awaitable<std::optional<Classified>> Gateway::classify(tcp::socket& guest,
                                                             std::chrono::milliseconds limit) {
  // Reads until the ClientHello or request head is whole, bounded in bytes
  // (FirstBytes) and in time.
  boost::system::error_code ec;
  guest.non_blocking(true, ec);
  FirstBytes bytes;
  asio::steady_timer timer(io_, limit);
  for (;;) {
    auto r = co_await (guest.async_wait(tcp::socket::wait_read, kTok) || timer.async_wait(kTok));
    if (r.index() == 1) {
      bytes.timeOut();
      break;
    }
    size_t n = guest.read_some(asio::buffer(relay_buf_), ec);
    if (ec == asio::error::would_block) continue;
    if (ec || n == 0) co_return std::nullopt;
    if (bytes.feed(std::string_view(relay_buf_.data(), n))) break;
  }
  co_return std::move(bytes).take();
}

asio::awaitable<std::optional<tcp::socket>> Gateway::dialFor(Flow& f, const Verdict& v,
                                                             tcp::endpoint original) {
  if (v.action == Verdict::Action::kDialName) co_return co_await dial(f, f.name);
  // To the guest's destination (decide() refused inward ones already; this
  // is the second line of defence).
  f.address = original.address().to_string();
  if (std::string why = classifier_.refusalReason(original.address()); !why.empty()) {
    deny(f, "inward-destination:" + why);
    co_return std::nullopt;
  }
  co_return co_await dialEndpoint(f, original);
}

asio::awaitable<void> Gateway::relay(Flow& f, Sandbox& sb, tcp::socket& guest, tcp::socket& up,
                                     std::string first, Verdict v,
                                     boost::asio::ip::address dialled) {
  // Registered first, so a policy change from here on resets the connection.
  const bool terminated = v.tier == Verdict::Tier::kTerminate;
  auto handle = std::make_shared<ConnHandle>();
  const bool by_address = v.action == Verdict::Action::kDialOriginal;
  handle->name = by_address ? "" : f.name;
  handle->port = f.port;
  handle->address = dialled;
  handle->by_address = by_address;
  handle->terminated = terminated;
  if (v.credential) handle->credential = v.credential->value;
  tcp::socket* g = &guest;
  tcp::socket* u = &up;
  handle->reset = [g, u] {
    resetSocket(*g);
    resetSocket(*u);
  };
  registry_.track(sb, handle);
  registry_.record(
      {"tcp", f.sandbox, f.name, f.address, f.port, true,
       terminated ? "terminate" : (v.tier == Verdict::Tier::kHttp ? "http" : "splice")});

  if (terminated) {
    co_await terminate(f, guest, up, std::move(first), std::move(v.credential),
                       &handle->last_active);
  } else if (v.tier == Verdict::Tier::kHttp) {
    co_await httpPlain(f, guest, up, std::move(first), &handle->last_active);
  } else {
    auto [wec, wn] = co_await asio::async_write(up, asio::buffer(first), kTok);
    if (!wec) {
      first = std::string();  // release the classification buffer before idling
      co_await splice(guest, up, &handle->last_active);
    }
  }
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
