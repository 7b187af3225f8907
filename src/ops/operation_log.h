#pragma once
// The operation log: every lifecycle change is an operation whose state is
// stored before anyone is told, and whose every step is an event in the
// store (the SSE streams replay them). Subscribers wait for their tenant's
// next event; front ends that answer synchronously await an operation's end.
//
// Used from one io thread. Event payloads are the API's JSON objects
// (ops/events.h): the stored event log is what SSE clients read.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "base/scope_exit.h"
#include "metrics/registry.h"
#include "ops/sandbox_log.h"
#include "store/store.h"

namespace vessel::ops {

namespace asio = boost::asio;

class OperationLog {
 public:
  OperationLog(store::Store& store, const WallClock& clock);
  ~OperationLog();
  OperationLog(const OperationLog&) = delete;
  OperationLog& operator=(const OperationLog&) = delete;

  // Several API replicas on one store: operations begun here record
  // `owner` (this replica), so another takes them over if it dies.
  void setOwner(std::string owner) { owner_ = std::move(owner); }
  const std::string& owner() const { return owner_; }
  // Wakes every subscriber to read the store again: events another replica
  // stored wake nobody here, so an API replica calls this on a short timer.
  void wakeAll();
  // Every sandbox state set here is also an entry of that sandbox's log
  // (`l` must outlive this; null: none).
  void setSandboxLog(SandboxLog* l) { sandbox_log_ = l; }
  // Operation latencies and failures go to `r` (which must outlive this).
  void setMetrics(metrics::Registry& r);

  // Runs `f` (a lifecycle call: it begins its operations without
  // suspending) so that the operations it begins name `request_id` (the
  // API request's X-Request-Id) in their events and in the sandbox's log
  // while this replica runs them. Not stored with the operation: one
  // taken over after a restart names none.
  template <typename F>
  auto forRequest(std::string request_id, F&& f) {
    std::string prev = std::exchange(request_id_, std::move(request_id));
    ScopeExit restore([&] { request_id_ = std::move(prev); });
    return f();
  }
  // The request operation `op_id` answers ("" for none known).
  std::string requestOf(const std::string& op_id) const;

  // A new pending operation of `kind` on `sandbox_id` ("" for none),
  // stored, with its operation.pending event.
  Result<store::OperationRecord> begin(const std::string& tenant, const std::string& sandbox_id,
                                       const std::string& kind);
  // Stores the operation's new state, then publishes operation.<state>.
  void set(store::OperationRecord& op, store::OpState state, const Error* error = nullptr);
  // Stores the event (at_ms set here) and wakes its tenant's subscribers.
  void publish(store::EventRecord e);
  // A sandbox.state event and the stored state (sessions end with the
  // sandbox: revoked when it is deleting, deleted or failed).
  void setSandbox(const std::string& tenant, const std::string& op_id, const std::string& id,
                  store::SandboxState state, const std::string& error = "");

  // Someone keeping state for sandboxes (a front end's watchers and
  // processes) hears of every sandbox state set here, at once, on the io
  // thread, for as long as it holds the returned pointer.
  using SandboxStateFn =
      std::function<void(const std::string& tenant, const std::string& id, store::SandboxState)>;
  [[nodiscard]] std::shared_ptr<SandboxStateFn> onSandboxState(SandboxStateFn fn);

  // Wakes when an event of one tenant (and, if given, one operation) is
  // published; events of other tenants never touch it, so one tenant's
  // burst costs nobody else a store read. An event published while the
  // subscriber was busy is not lost: the next wait() returns at once.
  class Subscription {
   public:
    ~Subscription();
    // Returns true when woken by an event, false at the deadline.
    asio::awaitable<bool> wait(std::chrono::steady_clock::time_point deadline);
    // Events that were delivered to this subscription (each one a wakeup
    // of its stream): tests count them instead of timing.
    uint64_t deliveries() const;

   private:
    friend class OperationLog;
    struct Waiter;
    std::shared_ptr<Waiter> w_;
  };
  // `operation_id` "": every event of the tenant (GET /v1/events); else only
  // that operation's (its stream, await()).
  std::unique_ptr<Subscription> subscribe(const std::string& tenant,
                                          const asio::any_io_executor& ex,
                                          const std::string& operation_id = "");

  // The operation once it is done or failed, or kDeadlineExceeded with the
  // operation's state at `deadline`; kNotFound for another tenant's.
  asio::awaitable<Result<store::OperationRecord>> await(
      std::string tenant, std::string id, std::chrono::steady_clock::time_point deadline);

  const WallClock& clock() const { return clock_; }

 private:
  struct Registry;
  store::Store& store_;
  const WallClock& clock_;
  std::string owner_;
  std::shared_ptr<Registry> subs_;
  std::vector<std::weak_ptr<SandboxStateFn>> state_fns_;
  SandboxLog* sandbox_log_ = nullptr;
  std::string request_id_;  // forRequest()'s, while it runs
  // The request each operation begun here answers, until it finishes.
  std::map<std::string, std::string> requests_;
  // operationJson(op) and the request it answers.
  boost::json::object opJson(const store::OperationRecord& op) const;
  metrics::Family<metrics::Histogram>* op_latency_ = nullptr;
  metrics::Family<metrics::Counter>* op_errors_ = nullptr;
};

}  // namespace vessel::ops
