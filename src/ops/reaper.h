#pragma once
// The reaper: sandboxes past their lifetime, or running and idle past
// their idle timeout, are ended (deleted) or, when they were created with
// pause_on_timeout, paused until the deployment's cap. What happens to one
// expired sandbox is a pure decision (decideReap, tested row by row in
// reaper_test.cc); the Reaper reads the expired ones from the store, asks
// the lifecycle to delete or pause each through ReapActions, and publishes
// sandbox.expired into the operation log. Used from one io thread.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <string>

#include "base/clock.h"
#include "metrics/registry.h"
#include "ops/operation_log.h"
#include "ops/policy.h"
#include "ops/sandbox_log.h"
#include "store/store.h"

namespace vessel::ops {

struct ReapStep {
  enum class Kind {
    kLeave,        // not the reaper's (deleting already), or waits to be running
    kDelete,       // ended: a sandbox.expired event, then a delete
    kPause,        // paused until the cap (a delete if the pause is refused)
    kKeepUntilCap  // paused already: it waits for a resume until the cap
  };
  Kind kind = Kind::kLeave;
  bool lifetime = false;  // the lifetime ended (else it was idle too long)
  std::string why;        // for the log and the event
  bool operator==(const ReapStep&) const = default;
};

// One sandbox the store listed as expired at `now_ms`, under a deployment
// cap of `max_lifetime_s` from its creation.
ReapStep decideReap(const store::SandboxRecord& sb, int64_t now_ms, int64_t max_lifetime_s);

// What the reaper asks of the lifecycle: each starts an operation and
// answers whether it was accepted.
struct ReapActions {
  std::function<Status(const store::SandboxRecord&)> remove;
  std::function<Status(const store::SandboxRecord&)> pause;  // a pause for its timeout
};

class Reaper {
 public:
  // `policy` is read at every pass (the lifecycle's, which setPolicy changes).
  Reaper(asio::io_context& io, store::Store& store, OperationLog& log, const WallClock& clock,
         const Policy& policy, ReapActions actions);
  ~Reaper();
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  // Each pass also collects the logs of sandboxes ended more than the
  // retention ago (at most once a minute); null: none.
  void setSandboxLog(SandboxLog* l) { sandbox_log_ = l; }
  // vessel_sandboxes_expired_total goes to `r`.
  void setMetrics(metrics::Registry& r);
  // Every policy.reap_interval, reapOnce(), until stop().
  void start();
  void stop();
  // Ends or pauses every expired sandbox (at the clock's now), each after
  // a sandbox.expired event. Returns how many it started ending or pausing.
  int reapOnce();

 private:
  asio::awaitable<void> loop();
  // A kPause step: kept until the cap, announced; an Error if the pause
  // was refused (then the sandbox is deleted instead).
  Status pause(const store::SandboxRecord& sb, const ReapStep& step);
  void announce(const store::SandboxRecord& sb, const ReapStep& step, bool paused);

  asio::io_context& io_;
  store::Store& store_;
  OperationLog& log_;
  const WallClock& clock_;
  const Policy& policy_;
  ReapActions actions_;
  std::shared_ptr<asio::steady_timer> timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  metrics::Family<metrics::Counter>* reaped_ = nullptr;
  SandboxLog* sandbox_log_ = nullptr;
  int64_t collected_ms_ = 0;  // the last collection (clock ms)
};

}  // namespace vessel::ops
