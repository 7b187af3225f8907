#include "ops/recovery.h"

namespace vessel::ops {

namespace {

RecoveryStep settle(SandboxState s) {
  return {RecoveryStep::Kind::kSettle, s, Action::kDelete, ""};
}
RecoveryStep rerun(Action a) { return {RecoveryStep::Kind::kRerun, SandboxState::kFailed, a, ""}; }
RecoveryStep fail(std::string why) {
  return {RecoveryStep::Kind::kFail, SandboxState::kFailed, Action::kDelete, std::move(why)};
}

}  // namespace

RecoveryStep decideRecovery(std::string_view op_kind, std::optional<SandboxState> holding,
                            SandboxState recorded) {
  const std::string lost = "vesseld restarted and the VM could not be taken over";
  bool running = holding == SandboxState::kRunning, paused = holding == SandboxState::kPaused;
  // A delete asked for, in any state: it goes on, or it has happened.
  if (op_kind == "delete" || recorded == SandboxState::kDeleting)
    return holding ? rerun(Action::kDelete) : settle(SandboxState::kDeleted);
  if (op_kind == "create") {
    if (running) return settle(SandboxState::kRunning);
    return fail("vesseld restarted before the sandbox was ready; its VM was discarded");
  }
  if (op_kind == "pause") {
    if (paused) return settle(SandboxState::kPaused);
    if (running) return rerun(Action::kPause);
    return fail(lost);
  }
  if (op_kind == "resume") {
    if (running) return settle(SandboxState::kRunning);
    if (paused) return rerun(Action::kResume);
    return fail(lost);
  }
  if (op_kind == "fork" && holding)
    return {RecoveryStep::Kind::kSettleFailOp, *holding, Action::kDelete,
            "vesseld restarted during the fork; unfinished copies failed"};
  if (holding) return settle(*holding);
  return fail(lost);
}

}  // namespace vessel::ops
