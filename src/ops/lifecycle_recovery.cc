// Restart recovery, clean stops and supervision: the lifecycle's side of
// sandboxes that change without a request (a restart, a VM that dies).
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "base/log.h"
#include "ops/lifecycle.h"
#include "ops/recovery.h"

namespace vessel::ops {

namespace {
Logger opsLog() { return Logger("ops"); }
}  // namespace

void Lifecycle::onLost(const std::string& tenant, const std::string& id,
                       const std::string& reason) {
  // An operation in flight settles the sandbox itself when it ends (it
  // asks the node what is left).
  if (busy_.count(id)) return;
  auto sb = store_.getSandbox(tenant, id);
  if (!sb.ok() || !*sb) return;
  // A local node loses running VMs only; a lost cluster node takes every
  // sandbox it had, whatever its state (a delete on it is lost too).
  auto st = (*sb)->state;
  if (st == SandboxState::kFailed || st == SandboxState::kDeleted) return;
  opsLog().warn("sandbox {} lost: {}", id, reason);
  if (lost_) lost_->with({}).inc();
  log_.setSandbox(tenant, "", id, SandboxState::kFailed, reason);
  // Its file servers serve no one now; its mounts are kept until its
  // delete (a failed sandbox still names its volumes).
  if (mounter_) mounter_->release(id);
}

asio::awaitable<void> Lifecycle::shutdown(bool stop_vms) {
  reaper_.stop();
  auto stopped = co_await node_.shutdown(stop_vms);
  // The node dropped its builds without calling back.
  failBuildsInFlight();
  for (const auto& id : stopped)
    if (auto s = store_.setSandboxState(id, SandboxState::kFailed,
                                        "vesseld stopped; the VM was stopped");
        !s.ok())
      opsLog().error("sandbox {}: {}", id, s.error().message());
}

asio::awaitable<int> Lifecycle::recover() {
  auto sandboxes = store_.listLiveSandboxes();
  auto ops = store_.listUnfinishedOperations();
  if (!sandboxes.ok() || !ops.ok()) {
    opsLog().error("recovery: cannot read the store: {}",
                   (!sandboxes.ok() ? sandboxes.error() : ops.error()).message());
    co_return 0;
  }
  std::map<std::string, std::vector<store::OperationRecord>> by_sandbox;
  for (auto& op : *ops) by_sandbox[op.sandbox_id].push_back(op);
  std::set<std::string> keep;
  int adopted = 0, failed = 0;
  for (auto& sb : *sandboxes) {
    std::vector<store::OperationRecord> mine;
    if (auto it = by_sandbox.find(sb.id); it != by_sandbox.end()) {
      mine = std::move(it->second);
      by_sandbox.erase(it);
    }
    bool recovered = co_await recoverSandbox(sb, std::move(mine), keep);
    if (recovered)
      ++adopted;
    else
      ++failed;
  }
  // Operations whose sandbox is already gone or failed (template builds
  // have no sandbox: their worker died with the old process).
  for (auto& [id, list] : by_sandbox)
    for (auto& op : list) {
      Error e(Code::kUnavailable, "vesseld restarted while the operation was in flight");
      log_.set(op, OpState::kFailed, &e);
    }
  int discarded = co_await node_.discardOrphans(keep);
  catalogue_.collect();  // after every surviving sandbox holds its version again
  if (!sandboxes->empty() || discarded > 0)
    opsLog().info("recovery: {} sandbox(es) taken over, {} lost, {} leftover(s) removed", adopted,
                  failed, discarded);
  co_return adopted;
}

asio::awaitable<void> Lifecycle::takeOver(std::vector<store::OperationRecord> ops) {
  std::map<std::string, std::vector<store::OperationRecord>> by_sandbox;
  for (auto& op : ops) by_sandbox[op.sandbox_id].push_back(op);
  std::set<std::string> keep;
  for (auto& [id, list] : by_sandbox) {
    auto sb = id.empty() ? Result<std::optional<store::SandboxRecord>>(std::nullopt)
                         : store_.getSandbox(list.front().tenant_id, id);
    bool live = sb.ok() && sb->has_value() && (*sb)->state != SandboxState::kFailed &&
                (*sb)->state != SandboxState::kDeleted;
    if (!live || busy_.count(id)) {
      for (auto& op : list) {
        Error e(Code::kUnavailable, "the API replica running it stopped");
        log_.set(op, OpState::kFailed, &e);
      }
      continue;
    }
    opsLog().info("sandbox {}: taking over {} operation(s) of a stopped API replica", id,
                  list.size());
    co_await recoverSandbox(**sb, std::move(list), keep);
  }
}

// Long because it applies decideRecovery's verdict for one sandbox: one
// case per verdict (adopt, finish, fail, destroy), each a few store and node calls.
asio::awaitable<bool> Lifecycle::recoverSandbox(store::SandboxRecord rec,
                                                std::vector<store::OperationRecord> ops,
                                                std::set<std::string>& keep) {
  auto held = co_await node_.adopt(rec.tenant_id, rec.id);
  std::optional<SandboxState> holding;
  if (held.ok() && *held != Holding::kNothing) {
    holding = *held == Holding::kRunning ? SandboxState::kRunning : SandboxState::kPaused;
    keep.insert(rec.id);
    opsLog().info("sandbox {} taken over after restart ({})", rec.id, stateName(*holding));
  } else {
    opsLog().warn("sandbox {} not taken over after restart: {}", rec.id,
                  held.ok() ? std::string("nothing left") : held.error().message());
  }
  // The newest unfinished operation decides; older ones cannot be in
  // flight at once (the state table forbids it) but are ended all the same.
  std::optional<store::OperationRecord> op;
  for (auto& o : ops) {
    if (op) {
      Error e(Code::kUnavailable, "vesseld restarted; superseded");
      log_.set(*op, OpState::kFailed, &e);
    }
    op = o;
  }
  RecoveryStep step = decideRecovery(op ? op->kind : "", holding, rec.state);
  auto record = [&](SandboxState st, const std::string& why) {
    log_.setSandbox(rec.tenant_id, op ? op->id : "", rec.id, st, why);
  };
  switch (step.kind) {
    case RecoveryStep::Kind::kSettle:
      if (rec.state != step.state) record(step.state, "");
      if (op) log_.set(*op, OpState::kDone);
      break;
    case RecoveryStep::Kind::kSettleFailOp: {
      if (rec.state != step.state) record(step.state, "");
      Error e(Code::kUnavailable, step.why);
      log_.set(*op, OpState::kFailed, &e);
      break;
    }
    case RecoveryStep::Kind::kFail: {
      std::string why = step.why;
      if (!held.ok()) why += ": " + held.error().message();
      record(SandboxState::kFailed, why);
      if (op) {
        Error e(Code::kUnavailable, why);
        log_.set(*op, OpState::kFailed, &e);
      }
      break;
    }
    case RecoveryStep::Kind::kRerun: {
      // A delete recorded without its operation (or with one) runs again.
      if (!op) {
        auto o = log_.begin(rec.tenant_id, rec.id, std::string(actionName(step.action)));
        if (!o.ok()) {
          record(SandboxState::kFailed, o.error().message());
          break;
        }
        op = *o;
      }
      auto t = transition(*holding, step.action);
      if (!t.ok()) {
        Error e(t.error().code(),
                "vesseld restarted during " + op->kind + ": " + t.error().message());
        record(SandboxState::kFailed, e.message());
        log_.set(*op, OpState::kFailed, &e);
        break;
      }
      opsLog().info("sandbox {}: running the {} operation {} again after restart", rec.id, op->kind,
                    op->id);
      record(t->during, "");
      if (step.action == Action::kDelete) {
        asio::co_spawn(io_, runDelete(*op), asio::detached);
      } else {
        busy_[rec.id];
        // A pause run again keeps memory: which kind was asked is not
        // recorded, and a whole pause is a correct (larger) one.
        asio::co_spawn(io_, runAction(*op, *t, true), asio::detached);
      }
      break;
    }
  }
  // Its guest kept its mounts, detached, for a host to take back: this
  // vesseld has none of their servers, so each is mounted anew.
  bool settled =
      step.kind == RecoveryStep::Kind::kSettle || step.kind == RecoveryStep::Kind::kSettleFailOp;
  if (holding == SandboxState::kRunning && settled && step.state == SandboxState::kRunning)
    co_await remountVolumes(rec.id);
  co_return holding.has_value();
}

}  // namespace vessel::ops
