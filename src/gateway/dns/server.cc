// The DNS server sandboxes see. It answers only names the sandbox's policy
// allows, only with A records the gateway resolved itself and classified,
// and never sends a query upstream for a name that is not allowed, so DNS is
// not an exfiltration channel beyond the allowed zones (docs/gateway.md).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "gateway/dns/message.h"
#include "gateway/gateway.h"
#include "gateway/name.h"

namespace vessel::gateway {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using tcp = asio::ip::tcp;
using udp = asio::ip::udp;

namespace {
constexpr auto kTok = asio::as_tuple(asio::use_awaitable);
constexpr uint32_t kMaxGuestTtl = 60;
constexpr std::chrono::seconds kTcpIdle{10};
}  // namespace

asio::awaitable<std::optional<std::string>> Gateway::answerDns(std::string packet,
                                                               asio::ip::address source) {
  Sandbox* sb = registry_.bySource(source);
  if (!sb) {
    registry_.record({"dns", "?" + source.to_string(), "", "", 0, false, "unknown-source"});
    co_return std::nullopt;
  }
  std::string sid = sb->id;
  // Each sandbox gets its share of the in-flight queries, so one flooding
  // sandbox cannot starve the others' resolution.
  Budget& budget = budgets_[sid];
  if (budget.dns >= cfg_.max_dns_inflight_per_sandbox) {
    registry_.record({"dns", sid, "", "", 0, false, "overloaded"});
    co_return std::nullopt;
  }
  struct InFlight {
    std::map<std::string, Budget>& budgets;
    std::string id;
    ~InFlight() {
      auto it = budgets.find(id);
      if (it != budgets.end() && it->second.dns > 0) --it->second.dns;
    }
  } in_flight{budgets_, sid};
  ++budget.dns;
  auto q = dns::parseQuery(packet);
  if (!q.ok()) {
    registry_.record({"dns", sid, "", "", 0, false, "malformed"});
    co_return std::nullopt;  // no id we trust enough to answer
  }
  auto refuse = [&](std::string_view name, std::string_view why, dns::Rcode rc) {
    registry_.record({"dns", sid, name, "", q->qtype, false, why});
    return dns::buildResponse(*q, rc, {});
  };
  auto name = normalizeName(q->name);
  if (!name.ok()) co_return refuse("", "bad-name", dns::Rcode::kRefused);
  if (q->qclass != dns::kClassIn) co_return refuse(*name, "class", dns::Rcode::kRefused);
  if (!sb->policy.allowsName(*name)) co_return refuse(*name, "policy", dns::Rcode::kRefused);
  if (q->qtype != dns::kTypeA) {
    // AAAA: there is no IPv6 path; HTTPS/SVCB/TXT/ANY: never forwarded, so
    // ECH configs and TXT channels do not exist. An empty NOERROR answer
    // keeps stub resolvers from retrying elsewhere.
    registry_.record({"dns", sid, *name, "", q->qtype, true, "nodata-type"});
    co_return dns::buildResponse(*q, dns::Rcode::kNoError, {});
  }
  auto records = co_await resolver_->resolve(*name, sid);
  if (!records.ok()) {
    bool nx = records.error().code() == Code::kNotFound;
    co_return refuse(*name, nx ? "nxdomain" : "resolve-failed",
                     nx ? dns::Rcode::kNxDomain : dns::Rcode::kServFail);
  }
  // The policy again: it may have changed while resolving. A denied range
  // is refused for every name that resolves into it, as an inward one is.
  sb = registry_.byId(sid);
  if (!sb) co_return refuse(*name, "policy-changed", dns::Rcode::kRefused);
  for (const auto& r : *records) {
    if (std::string why = policy::refuseAnswer(sb->policy, classifier_, r.address, std::nullopt);
        !why.empty()) {
      co_return refuse(*name, why, dns::Rcode::kRefused);
    }
  }
  std::vector<dns::Record> answers = *records;
  for (auto& r : answers) r.ttl = std::min(r.ttl, kMaxGuestTtl);
  registry_.record(
      {"dns", sid, *name, answers.front().address.to_string(), q->qtype, true, "answered"});
  co_return dns::buildResponse(*q, dns::Rcode::kNoError, answers);
}

asio::awaitable<void> Gateway::serveDnsUdp() {
  std::array<char, 1500> buf;
  for (;;) {
    udp::endpoint from;
    auto [ec, n] = co_await dns_udp_->async_receive_from(asio::buffer(buf), from, kTok);
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) continue;
    if (dns_inflight_ >= cfg_.max_dns_inflight) {
      registry_.record({"dns", "-", "", "", 0, false, "overloaded"});
      continue;
    }
    ++dns_inflight_;
    asio::co_spawn(
        io_,
        [this, packet = std::string(buf.data(), n), from]() -> asio::awaitable<void> {
          auto out = co_await answerDns(packet, from.address());
          if (out) co_await dns_udp_->async_send_to(asio::buffer(*out), from, kTok);
          --dns_inflight_;
        },
        asio::detached);
  }
}

asio::awaitable<void> Gateway::acceptDnsTcp() {
  for (;;) {
    auto [ec, s] = co_await dns_tcp_acceptor_->async_accept(kTok);
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) {
      asio::steady_timer t(io_, std::chrono::milliseconds(50));
      co_await t.async_wait(kTok);
      continue;
    }
    asio::co_spawn(io_, serveDnsTcp(std::move(s)), asio::detached);
  }
}

asio::awaitable<void> Gateway::serveDnsTcp(tcp::socket s) {
  boost::system::error_code ec;
  auto peer = s.remote_endpoint(ec);
  if (ec) co_return;
  for (;;) {
    std::array<unsigned char, 2> len_buf;
    asio::steady_timer idle(io_, kTcpIdle);
    auto r = co_await (asio::async_read(s, asio::buffer(len_buf), kTok) || idle.async_wait(kTok));
    if (r.index() == 1 || std::get<0>(std::get<0>(r))) co_return;
    size_t len = (static_cast<size_t>(len_buf[0]) << 8) | len_buf[1];
    if (len < 12) co_return;
    std::string packet(len, '\0');
    auto r2 = co_await (asio::async_read(s, asio::buffer(packet), kTok) || idle.async_wait(kTok));
    if (r2.index() == 1 || std::get<0>(std::get<0>(r2))) co_return;
    auto out = co_await answerDns(std::move(packet), peer.address());
    if (!out) co_return;
    std::string framed{static_cast<char>(out->size() >> 8), static_cast<char>(out->size() & 0xff)};
    framed += *out;
    auto [wec, wn] = co_await asio::async_write(s, asio::buffer(framed), kTok);
    if (wec) co_return;
  }
}

}  // namespace vessel::gateway
