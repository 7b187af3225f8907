#include "vesseld/egress_log.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <map>
#include <optional>

#include "gateway/control_client.h"
#include "ops/events.h"

namespace vessel::vesseld {

namespace asio = boost::asio;
namespace json = boost::json;

EgressLog::EgressLog(asio::io_context& io, Options opts, std::shared_ptr<ops::SandboxLog*> log)
    : io_(io), opts_(std::move(opts)), log_(std::move(log)) {
  asio::co_spawn(io_, loop(), asio::detached);
}

EgressLog::~EgressLog() {
  alive_.reset();
  worker_.join();
}

namespace {

std::string text(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

int64_t number(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  if (v && v->is_int64()) return v->get_int64();
  if (v && v->is_uint64()) return static_cast<int64_t>(v->get_uint64());
  return 0;
}

// Blocking; on the worker. nullopt: the gateway did not answer (read
// again next time). An optional: co_spawn needs a default-constructible
// result, which Result is not.
asio::awaitable<std::optional<json::object>> readDecisions(std::string socket,
                                                           std::chrono::milliseconds timeout,
                                                           uint64_t after) {
  auto c = gateway::ControlClient::connect(socket, timeout);
  if (!c.ok()) co_return std::nullopt;
  auto r = c->call({{"op", "decisions"}, {"after", after}});
  if (!r.ok()) co_return std::nullopt;
  co_return std::move(*r);
}

}  // namespace

uint64_t EgressLog::take(const json::object& reply, uint64_t after, ops::SandboxLog& log) {
  auto* list = reply.if_contains("decisions");
  uint64_t last = static_cast<uint64_t>(number(reply, "last"));
  // A gateway started again numbers from 1: read from its start.
  if (last < after) return 0;
  if (!list || !list->is_array()) return after;
  std::map<std::string, int> per_sandbox, skipped;
  for (const auto& v : list->get_array()) {
    if (!v.is_object()) continue;
    const json::object& d = v.get_object();
    after = std::max<uint64_t>(after, static_cast<uint64_t>(number(d, "seq")));
    std::string sandbox = text(d, "sandbox");
    if (sandbox.empty() || sandbox[0] == '?') continue;  // "?<address>": no sandbox's
    if (++per_sandbox[sandbox] > kMaxEgressPerRead) {
      ++skipped[sandbox];
      continue;
    }
    std::string flow = text(d, "kind");
    json::object e{{"flow", flow},
                   {"name", text(d, "name")},
                   {"verdict", text(d, "verdict")},
                   {"reason", text(d, "reason")},
                   {"at", ops::rfc3339(number(d, "at_ms"))}};
    // A lookup's "port" is the query's type.
    e[flow == "dns" ? "qtype" : "port"] = number(d, "port");
    if (std::string a = text(d, "address"); !a.empty()) e["address"] = a;
    log.append(sandbox, ops::kLogEgress, std::move(e));
  }
  for (const auto& [sandbox, n] : skipped)
    log.append(sandbox, ops::kLogEgress, json::object{{"skipped", n}});
  return after;
}

asio::awaitable<void> EgressLog::loop() {
  std::weak_ptr<bool> alive = alive_;
  asio::steady_timer t(io_);
  uint64_t after = 0;
  for (;;) {
    t.expires_after(opts_.every);
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec || alive.expired()) co_return;
    // The call blocks: on the worker, over a connection of its own.
    auto r = co_await asio::co_spawn(worker_,
                                     readDecisions(opts_.control_socket, opts_.call_timeout, after),
                                     asio::use_awaitable);
    if (alive.expired()) co_return;
    ops::SandboxLog* log = *log_;
    if (!log) co_return;
    if (r) after = take(*r, after, *log);
  }
}

}  // namespace vessel::vesseld
