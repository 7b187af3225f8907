#include "ops/operation_log.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <random>
#include <set>

#include "base/log.h"
#include "base/new_id.h"
#include "ops/events.h"

namespace vessel::ops {

namespace json = boost::json;
using store::OpState;
using store::SandboxState;

struct OperationLog::Subscription::Waiter {
  explicit Waiter(const asio::any_io_executor& ex) : timer(ex) {}
  std::string tenant;
  std::string operation;  // "" = every operation of the tenant
  asio::steady_timer timer;
  uint64_t deliveries = 0;
  bool waiting = false;
  bool pending = false;  // an event came while nobody waited
};

struct OperationLog::Registry {
  std::multimap<std::string, std::weak_ptr<Subscription::Waiter>> by_tenant;
  void wake(const std::string& tenant, const std::string& operation) {
    auto [b, e] = by_tenant.equal_range(tenant);
    for (auto it = b; it != e; ++it)
      if (auto w = it->second.lock(); w && (w->operation.empty() || w->operation == operation)) {
        ++w->deliveries;
        w->pending = true;
        if (w->waiting) w->timer.cancel();
      }
  }
  void drop(const Subscription::Waiter* w) {
    auto [b, e] = by_tenant.equal_range(w->tenant);
    for (auto it = b; it != e; ++it)
      if (auto p = it->second.lock(); !p || p.get() == w) {
        by_tenant.erase(it);
        return;
      }
  }
};

OperationLog::OperationLog(store::Store& store, const WallClock& clock)
    : store_(store), clock_(clock), subs_(std::make_shared<Registry>()) {}

OperationLog::~OperationLog() {
  // Subscribers still waiting (their coroutines may outlive this object
  // when the io_context is torn down) are woken to find the log gone.
  for (auto& [tenant, weak] : subs_->by_tenant)
    if (auto w = weak.lock()) w->timer.cancel();
}

OperationLog::Subscription::~Subscription() = default;

void OperationLog::wakeAll() {
  // Not a delivery: a poll, after which each waiter reads the store again.
  for (auto& [tenant, weak] : subs_->by_tenant)
    if (auto w = weak.lock()) {
      w->pending = true;
      if (w->waiting) w->timer.cancel();
    }
}

uint64_t OperationLog::Subscription::deliveries() const { return w_->deliveries; }

asio::awaitable<bool> OperationLog::Subscription::wait(
    std::chrono::steady_clock::time_point deadline) {
  auto w = w_;
  if (w->pending) {
    w->pending = false;
    co_return true;
  }
  w->timer.expires_at(deadline);
  w->waiting = true;
  auto [ec] = co_await w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  w->waiting = false;
  bool woken = w->pending;
  w->pending = false;
  co_return woken || ec;
}

std::unique_ptr<OperationLog::Subscription> OperationLog::subscribe(
    const std::string& tenant, const asio::any_io_executor& ex, const std::string& operation_id) {
  auto s = std::make_unique<Subscription>();
  s->w_ = std::shared_ptr<Subscription::Waiter>(
      new Subscription::Waiter(ex),
      [reg = std::weak_ptr<Registry>(subs_)](Subscription::Waiter* w) {
        if (auto r = reg.lock()) r->drop(w);
        delete w;
      });
  s->w_->tenant = tenant;
  s->w_->operation = operation_id;
  subs_->by_tenant.emplace(tenant, s->w_);
  return s;
}

void OperationLog::setMetrics(metrics::Registry& r) {
  op_latency_ = &r.histogram("vessel_operation_duration_seconds",
                             "Time from an operation's request to its end, by kind and outcome",
                             {"kind", "state"});
  op_errors_ = &r.counter("vessel_operation_errors_total",
                          "Failed operations, by kind and error code", {"kind", "code"});
}

Result<store::OperationRecord> OperationLog::begin(const std::string& tenant,
                                                   const std::string& sandbox_id,
                                                   const std::string& kind) {
  store::OperationRecord op;
  op.id = newId("op");
  op.tenant_id = tenant;
  op.sandbox_id = sandbox_id;
  op.kind = kind;
  op.state = OpState::kPending;
  op.created_ms = op.updated_ms = clock_.nowMs();
  op.owner = owner_;
  VESSEL_TRY(store_.insertOperation(op));
  if (!request_id_.empty()) requests_[op.id] = request_id_;
  publish({0, tenant, op.id, sandbox_id, "operation.pending", json::serialize(opJson(op))});
  return op;
}

std::string OperationLog::requestOf(const std::string& op_id) const {
  auto it = requests_.find(op_id);
  return it == requests_.end() ? std::string() : it->second;
}

json::object OperationLog::opJson(const store::OperationRecord& op) const {
  json::object o = operationJson(op);
  if (auto r = requestOf(op.id); !r.empty()) o["request_id"] = r;
  return o;
}

void OperationLog::set(store::OperationRecord& op, OpState state, const Error* error) {
  op.state = state;
  op.error_code = error ? std::string(codeName(error->code())) : "";
  op.error_message = error ? error->message() : "";
  op.updated_ms = clock_.nowMs();
  if (auto s = store_.setOperationState(op.id, op.state, op.error_code, op.error_message); !s.ok())
    Logger("ops").error("operation {}: {}", op.id, s.error().message());
  publish({0, op.tenant_id, op.id, op.sandbox_id,
           "operation." + std::string(store::opStateName(state)), json::serialize(opJson(op))});
  if (store::finished(state)) requests_.erase(op.id);
  if (op_latency_ && store::finished(state)) {
    op_latency_->with({op.kind, std::string(store::opStateName(state))})
        .observe(static_cast<double>(op.updated_ms - op.created_ms) / 1000.0);
    if (error) op_errors_->with({op.kind, op.error_code}).inc();
  }
}

void OperationLog::setSandbox(const std::string& tenant, const std::string& op_id,
                              const std::string& id, SandboxState state, const std::string& error) {
  std::string name(store::stateName(state));
  if (auto s = store_.setSandboxState(id, state, error); !s.ok())
    Logger("ops").error("sandbox {}: {}", id, s.error().message());
  // Its data-plane sessions end with it.
  if (state == SandboxState::kDeleting || state == SandboxState::kDeleted ||
      state == SandboxState::kFailed)
    if (auto n = store_.revokeSessions(id); !n.ok())
      Logger("ops").error("sandbox {}: revoke sessions: {}", id, n.error().message());
  json::object data{{"id", id}, {"state", name}};
  if (!error.empty()) data["error"] = error;
  std::string request = op_id.empty() ? std::string() : requestOf(op_id);
  if (!request.empty()) data["request_id"] = request;
  if (sandbox_log_ && state != SandboxState::kCreating) {
    // The sandbox's own log: each state it reaches, and why it failed.
    json::object fields;
    if (!op_id.empty()) fields["operation"] = op_id;
    if (!request.empty()) fields["request_id"] = request;
    if (!error.empty()) fields["error"] = error;
    sandbox_log_->lifecycle(id, name, std::move(fields));
  }
  publish({0, tenant, op_id, id, "sandbox.state", json::serialize(data)});
  // A listener may register or drop another while called: call a copy.
  std::erase_if(state_fns_, [](const auto& w) { return w.expired(); });
  auto fns = state_fns_;
  for (auto& w : fns)
    if (auto fn = w.lock()) (*fn)(tenant, id, state);
}

std::shared_ptr<OperationLog::SandboxStateFn> OperationLog::onSandboxState(SandboxStateFn fn) {
  auto p = std::make_shared<SandboxStateFn>(std::move(fn));
  state_fns_.push_back(p);
  return p;
}

void OperationLog::publish(store::EventRecord e) {
  e.at_ms = clock_.nowMs();
  if (auto s = store_.appendEvent(e); !s.ok()) {
    Logger("ops").error("event {} of {}: {}", e.type, e.operation_id, s.error().message());
    return;
  }
  subs_->wake(e.tenant_id, e.operation_id);
}

asio::awaitable<Result<store::OperationRecord>> OperationLog::await(
    std::string tenant, std::string id, std::chrono::steady_clock::time_point deadline) {
  auto sub = subscribe(tenant, co_await asio::this_coro::executor, id);
  auto reg = std::weak_ptr<Registry>(subs_);
  for (;;) {
    // Subscribed before reading: an end published after the read wakes us.
    auto op = store_.getOperation(tenant, id);
    if (!op.ok()) co_return std::move(op).error();
    if (!op->has_value()) co_return Error(Code::kNotFound, "operation " + id + " does not exist");
    if (store::finished((*op)->state)) co_return std::move(**op);
    if (std::chrono::steady_clock::now() >= deadline)
      co_return Error(Code::kDeadlineExceeded, "operation " + id + " is still " +
                                                   std::string(store::opStateName((*op)->state)));
    co_await sub->wait(deadline);
    if (reg.expired()) co_return Error(Code::kUnavailable, "shutting down");
  }
}

}  // namespace vessel::ops
