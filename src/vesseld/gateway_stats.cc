#include "vesseld/gateway_stats.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <cctype>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "gateway/control_client.h"

namespace vessel::vesseld {

namespace asio = boost::asio;
namespace json = boost::json;
using Steady = std::chrono::steady_clock;

// Shared with the worker's completion (posted to the io thread), which may
// land after this object is gone; touched on the io thread only.
struct GatewayStats::State {
  std::optional<json::object> counters;  // the last successful read
  Steady::time_point read_at;            // when `counters` was read
  bool last_failed = false;              // the newest read failed
  bool in_flight = false;
  Steady::time_point started_at;
  uint64_t reads = 0;
  std::set<asio::steady_timer*> waiters;  // scrapes waiting for the read in flight
};

GatewayStats::GatewayStats(asio::io_context& io, Options opts)
    : io_(io), opts_(std::move(opts)), state_(std::make_shared<State>()) {}

GatewayStats::~GatewayStats() { worker_.join(); }

uint64_t GatewayStats::readsStarted() const { return state_->reads; }

void GatewayStats::startRead() {
  state_->in_flight = true;
  state_->started_at = Steady::now();
  ++state_->reads;
  asio::post(worker_, [socket = opts_.control_socket, timeout = opts_.call_timeout,
                       st = std::weak_ptr<State>(state_), &io = io_] {
    // A fresh connection each time: it is never shared with the io
    // thread's control connection, and a wedged one is not kept.
    Result<json::object> r = [&]() -> Result<json::object> {
      VESSEL_ASSIGN_OR_RETURN(auto c, gateway::ControlClient::connect(socket, timeout));
      return c.call({{"op", "stats"}});
    }();
    asio::post(io, [st, r = std::move(r)]() mutable {
      auto s = st.lock();
      if (!s) return;
      s->in_flight = false;
      s->last_failed = !r.ok();
      if (r.ok()) {
        s->counters = std::move(*r);
        s->read_at = Steady::now();
      }
      for (auto* t : s->waiters) t->cancel();
    });
  });
}

asio::awaitable<void> GatewayStats::refresh() {
  auto st = state_;
  bool fresh = st->counters && !st->last_failed && Steady::now() - st->read_at < opts_.max_age;
  if (fresh) co_return;
  if (!st->in_flight) startRead();
  asio::steady_timer t(co_await asio::this_coro::executor, opts_.wait);
  st->waiters.insert(&t);
  co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  st->waiters.erase(&t);
}

void GatewayStats::write(metrics::SampleWriter& w, bool gateway_up) const {
  w.family("vessel_gateway_up", "Whether vessel-gateway is running (it is restarted if not).",
           "gauge");
  w.sample("vessel_gateway_up", {}, {}, gateway_up ? 1 : 0);
  const State& s = *state_;
  // Stale: the numbers below are not from a read that answered just now
  // (it failed, or is still waiting for a gateway that has not answered).
  bool stale = !s.counters || s.last_failed || s.in_flight;
  w.family("vessel_gateway_stats_stale",
           "1 when the gateway counters below are not current: the last read of them failed "
           "or did not answer in time (the counters shown are the last ones read).",
           "gauge");
  w.sample("vessel_gateway_stats_stale", {}, {}, stale ? 1 : 0);
  if (!s.counters) return;
  w.family("vessel_gateway_stats_age_seconds", "Age of the gateway counters shown.", "gauge");
  w.sample("vessel_gateway_stats_age_seconds", {}, {},
           std::chrono::duration<double>(Steady::now() - s.read_at).count());
  writeGatewayCounters(*s.counters, w);
}

void writeGatewayCounters(const json::object& stats, metrics::SampleWriter& w) {
  auto number = [](const json::value& v) -> double {
    if (v.is_uint64()) return static_cast<double>(v.as_uint64());
    if (v.is_int64()) return static_cast<double>(v.as_int64());
    return 0;
  };
  w.family("vessel_gateway_events_total",
           "Egress flows (kind tcp) and DNS queries (kind dns) by verdict and reason.", "counter");
  std::vector<std::pair<std::string, double>> other;
  if (auto* c = stats.if_contains("counters"); c && c->is_object()) {
    for (const auto& [k, v] : c->as_object()) {
      std::string key(k);
      auto a = key.find('_');
      auto b = a == std::string::npos ? a : key.find('_', a + 1);
      std::string kind = key.substr(0, a);
      if ((kind == "tcp" || kind == "dns") && a != std::string::npos) {
        if (b == std::string::npos) continue;  // per-verdict sums: implied by the reasons
        w.sample("vessel_gateway_events_total", {"kind", "verdict", "reason"},
                 {kind, key.substr(a + 1, b - a - 1), key.substr(b + 1)}, number(v));
      } else {
        other.emplace_back(key, number(v));
      }
    }
  }
  for (const auto& [key, n] : other) {
    std::string name = "vessel_gateway_";
    for (char ch : key) name.push_back(std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_');
    name += "_total";
    w.family(name, "vessel-gateway counter " + key + ".", "counter");
    w.sample(name, {}, {}, n);
  }
  if (auto* c = stats.if_contains("connections")) {
    w.family("vessel_gateway_connections", "Open connections through the gateway.", "gauge");
    w.sample("vessel_gateway_connections", {}, {}, number(*c));
  }
}

}  // namespace vessel::vesseld
