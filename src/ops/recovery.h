#pragma once
// What a restart does with each sandbox the store says is alive: a pure
// decision from the newest unfinished operation's kind and what the node
// actually holds, so the whole table is tested without a VM
// (recovery_test.cc). Lifecycle::recover carries the decisions out.
#include <optional>
#include <string>
#include <string_view>

#include "ops/state_machine.h"

namespace vessel::ops {

struct RecoveryStep {
  enum class Kind {
    kSettle,  // record `state`; the operation (if any) is done
    kRerun,   // the operation runs again on what the node holds (`action`)
    kFail,    // the sandbox is failed with `why`; so is the operation
    // The sandbox carries on in `state` but its operation failed (a fork:
    // unfinished copies cannot be finished).
    kSettleFailOp,
  };
  Kind kind;
  SandboxState state = SandboxState::kFailed;
  Action action = Action::kDelete;
  std::string why;
  bool operator==(const RecoveryStep&) const = default;
};

// `op_kind`: the newest unfinished operation's kind ("" when none).
// `holding`: what the node took over (kRunning, kPaused) or nullopt when
// it could not take anything over. `recorded`: the stored state.
RecoveryStep decideRecovery(std::string_view op_kind, std::optional<SandboxState> holding,
                            SandboxState recorded);

}  // namespace vessel::ops
