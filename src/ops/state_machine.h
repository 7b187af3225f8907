#pragma once
// The lifecycle of a sandbox as seen by the API: its states, the requests
// that change them, and the one table saying which request is legal in
// which state. Every lifecycle request is looked up here before anything
// happens; an illegal one is refused with the current state.
#include <optional>
#include <string_view>

#include "base/result.h"

namespace vessel::ops {

enum class SandboxState {
  kCreating,
  kRunning,
  kPausing,
  kPaused,
  kResuming,
  kForking,  // briefly paused while its state is copied, then running again
  kDeleting,
  kDeleted,
  kFailed
};
enum class Action { kPause, kResume, kDelete, kFork };
enum class OpState { kPending, kRunning, kDone, kFailed };

std::string_view stateName(SandboxState s);
std::optional<SandboxState> parseState(std::string_view s);
std::string_view actionName(Action a);
std::string_view opStateName(OpState s);

// One row of the table: `action` in state `from` moves the sandbox to
// `during` while its operation runs, then to `done` (or kFailed).
struct Transition {
  SandboxState from;
  Action action;
  SandboxState during;
  SandboxState done;
};

inline constexpr Transition kTransitions[] = {
    {SandboxState::kRunning, Action::kPause, SandboxState::kPausing, SandboxState::kPaused},
    {SandboxState::kPaused, Action::kResume, SandboxState::kResuming, SandboxState::kRunning},
    {SandboxState::kRunning, Action::kFork, SandboxState::kForking, SandboxState::kRunning},
    {SandboxState::kRunning, Action::kDelete, SandboxState::kDeleting, SandboxState::kDeleted},
    {SandboxState::kPaused, Action::kDelete, SandboxState::kDeleting, SandboxState::kDeleted},
    {SandboxState::kFailed, Action::kDelete, SandboxState::kDeleting, SandboxState::kDeleted},
};

// The row for `action` in state `from`, or kFailedPrecondition naming the
// current state ("cannot resume a sandbox that is running").
Result<Transition> transition(SandboxState from, Action action);

}  // namespace vessel::ops
