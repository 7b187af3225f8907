#include "ops/reaper.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "base/log.h"
#include "ops/events.h"
#include "ops/state_machine.h"

namespace vessel::ops {

namespace json = boost::json;

namespace {
Logger opsLog() { return Logger("ops"); }
}  // namespace

ReapStep decideReap(const store::SandboxRecord& sb, int64_t now_ms, int64_t max_lifetime_s) {
  ReapStep step;
  // Deleting ones are on their way; every other state may be deleted,
  // busy ones too (a hung resume must not outlive its lifetime).
  if (!transition(sb.state, Action::kDelete).ok()) return step;
  step.lifetime = sb.expires_ms > 0 && sb.expires_ms <= now_ms;
  step.why = step.lifetime ? "its lifetime ended at " + rfc3339(sb.expires_ms)
                           : "idle for " + std::to_string(sb.idle_timeout_s) + " s";
  // Pausing on timeout: until the deployment's cap, which ends every
  // sandbox however it asked to be kept.
  int64_t cap = sb.created_ms + max_lifetime_s * 1000;
  if (!sb.pause_on_timeout || now_ms >= cap || sb.state == SandboxState::kFailed) {
    step.kind = ReapStep::Kind::kDelete;
  } else if (sb.state == SandboxState::kRunning) {
    step.kind = ReapStep::Kind::kPause;
  } else if (sb.state == SandboxState::kPaused || sb.state == SandboxState::kPausing) {
    // Paused already (by hand): it waits for a resume until the cap.
    step.kind = ReapStep::Kind::kKeepUntilCap;
  }
  // Else creating, resuming or forking: paused once running (the node
  // bounds those operations, so a stuck one fails on its own).
  return step;
}

Reaper::Reaper(asio::io_context& io, store::Store& store, OperationLog& log, const WallClock& clock,
               const Policy& policy, ReapActions actions)
    : io_(io),
      store_(store),
      log_(log),
      clock_(clock),
      policy_(policy),
      actions_(std::move(actions)) {}

Reaper::~Reaper() {
  alive_.reset();
  stop();
}

void Reaper::setMetrics(metrics::Registry& r) {
  reaped_ = &r.counter("vessel_sandboxes_expired_total",
                       "Sandboxes the reaper ended, by reason (idle, lifetime)", {"reason"});
}

void Reaper::start() {
  timer_ = std::make_shared<asio::steady_timer>(io_);
  asio::co_spawn(io_, loop(), asio::detached);
}

void Reaper::stop() {
  if (!timer_) return;
  timer_->cancel();
  timer_.reset();
}

asio::awaitable<void> Reaper::loop() {
  auto timer = timer_;  // outlives this object if the io_context is torn down first
  auto alive = std::weak_ptr<bool>(alive_);
  for (;;) {
    timer->expires_after(policy_.reap_interval);
    auto [ec] = co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec || alive.expired() || !timer_) co_return;
    reapOnce();
  }
}

int Reaper::reapOnce() {
  int64_t now = clock_.nowMs();
  if (sandbox_log_ && (collected_ms_ == 0 || now - collected_ms_ >= 60'000)) {
    // Logs of ended sandboxes, past their retention: not every pass, since
    // retention is counted in hours and the query scans ended sandboxes.
    collected_ms_ = now;
    if (int gone = sandbox_log_->collect(); gone > 0)
      opsLog().info("reaper: collected {} log entries of ended sandboxes", gone);
  }
  auto expired = store_.listExpired(now, 32);
  if (!expired.ok()) {
    opsLog().warn("reaper: {}", expired.error().message());
    return 0;
  }
  int n = 0;
  for (const auto& sb : *expired) {
    ReapStep step = decideReap(sb, now, policy_.max_lifetime_s);
    if (step.kind == ReapStep::Kind::kLeave) continue;
    if (step.kind == ReapStep::Kind::kKeepUntilCap) {
      (void)store_.setSandboxLifetime(sb.id, sb.idle_timeout_s,
                                      sb.created_ms + policy_.max_lifetime_s * 1000);
      continue;
    }
    if (step.kind == ReapStep::Kind::kPause) {
      Status s = pause(sb, step);
      if (s.ok()) {
        ++n;
        continue;
      }
      // Not pausable now (the state disk is full, say): it ends as a
      // timeout ends any other sandbox rather than run on.
      opsLog().warn("reaper: sandbox {}: cannot pause ({}): deleting", sb.id, s.error().message());
    }
    opsLog().info("sandbox {} expired ({}): deleting", sb.id, step.why);
    announce(sb, step, false);
    if (Status s = actions_.remove(sb); !s.ok()) {
      opsLog().warn("reaper: sandbox {}: {}", sb.id, s.error().message());
      continue;
    }
    ++n;
  }
  return n;
}

Status Reaper::pause(const store::SandboxRecord& sb, const ReapStep& step) {
  VESSEL_TRY(actions_.pause(sb));
  // Kept until the cap from now on, so the reaper leaves it alone while it
  // pauses and while it is paused (the pause runs later on the io thread).
  int64_t cap = sb.created_ms + policy_.max_lifetime_s * 1000;
  if (auto s = store_.setSandboxLifetime(sb.id, sb.idle_timeout_s, cap); !s.ok())
    opsLog().warn("sandbox {}: keep until the cap: {}", sb.id, s.error().message());
  opsLog().info("sandbox {} expired ({}): pausing{}", sb.id, step.why,
                sb.pause_memory ? "" : " (disk only)");
  announce(sb, step, true);
  return okStatus();
}

void Reaper::announce(const store::SandboxRecord& sb, const ReapStep& step, bool paused) {
  const char* reason = step.lifetime ? "lifetime" : "idle";
  json::object data{{"id", sb.id}, {"reason", reason}, {"message", step.why}};
  if (paused) data["action"] = "pause";
  log_.publish({0, sb.tenant_id, "", sb.id, "sandbox.expired", json::serialize(data)});
  if (reaped_) reaped_->with({reason}).inc();
}

}  // namespace vessel::ops
