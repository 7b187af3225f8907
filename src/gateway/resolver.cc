#include "gateway/resolver.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace vessel::gateway {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace {
constexpr auto kTok = asio::as_tuple(asio::use_awaitable);
constexpr uint32_t kMaxTtl = 300;
}  // namespace

asio::awaitable<Result<dns::Answer>> Resolver::queryOnce(const std::string& name) {
  // A fresh socket per query: a random source port as well as a random id.
  asio::ip::udp::socket sock(io_);
  boost::system::error_code ec;
  sock.open(upstream_.protocol(), ec);
  if (ec) co_return Error(Code::kUnavailable, "resolver socket: " + ec.message());
  uint16_t id = static_cast<uint16_t>(rng_());
  std::string q = dns::buildQuery(id, name, dns::kTypeA);
  auto [sec, sent] = co_await sock.async_send_to(asio::buffer(q), upstream_, kTok);
  if (sec) co_return Error(Code::kUnavailable, "resolver send: " + sec.message());
  asio::steady_timer timer(io_, timeout_);
  std::array<char, 1500> buf;
  for (;;) {
    asio::ip::udp::endpoint from;
    auto r =
        co_await (sock.async_receive_from(asio::buffer(buf), from, kTok) || timer.async_wait(kTok));
    if (r.index() == 1) co_return Error(Code::kDeadlineExceeded, "resolver timeout for " + name);
    auto [rec, n] = std::get<0>(r);
    if (rec) co_return Error(Code::kUnavailable, "resolver receive: " + rec.message());
    // Only the resolver we asked, answering the question we asked, counts;
    // anything else on this port is ignored, not believed.
    if (from != upstream_) continue;
    auto ans = dns::parseResponse(std::string_view(buf.data(), n), id, name, dns::kTypeA);
    if (!ans.ok()) continue;
    co_return std::move(*ans);
  }
}

asio::awaitable<Result<std::vector<dns::Record>>> Resolver::resolve(std::string name,
                                                                    std::string owner) {
  if (auto hit = cache_.find(name, std::chrono::steady_clock::now())) co_return std::move(*hit);
  Result<dns::Answer> ans = Error(Code::kInternal, "unreached");
  for (int attempt = 0; attempt < 2; ++attempt) {
    ans = co_await queryOnce(name);
    if (ans.ok() || ans.error().code() != Code::kDeadlineExceeded) break;
  }
  if (!ans.ok()) co_return std::move(ans).error();
  if (ans->rcode != dns::Rcode::kNoError) {
    co_return Error(Code::kNotFound,
                    "resolve " + name + ": rcode " + std::to_string(static_cast<int>(ans->rcode)));
  }
  if (ans->records.empty()) co_return Error(Code::kNotFound, "resolve " + name + ": no A records");
  uint32_t ttl = kMaxTtl;
  for (auto& r : ans->records) ttl = std::min(ttl, r.ttl);
  cache_.insert(name, ans->records, std::chrono::seconds(ttl), owner,
                std::chrono::steady_clock::now());
  co_return std::move(ans->records);
}

}  // namespace vessel::gateway
