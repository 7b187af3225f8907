#pragma once
// The lifecycle of a sandbox: its states (store::SandboxState, one enum
// from the store's rows to the API), the requests that change them, and the
// one table saying which request is legal in which state. Every lifecycle
// request is looked up here before anything happens; an illegal one is
// refused with the current state.
#include <optional>
#include <string_view>

#include "base/result.h"
#include "store/states.h"

namespace vessel::ops {

using store::OpState;
using store::opStateName;
using store::parseOpState;
using store::parseState;
using store::SandboxState;
using store::stateName;

enum class Action { kPause, kResume, kDelete, kFork };

std::string_view actionName(Action a);

// One row of the table: `action` in state `from` moves the sandbox to
// `during` while its operation runs, then to `done` (or kFailed).
struct Transition {
  SandboxState from;
  Action action;
  SandboxState during;
  SandboxState done;
};

// Delete is legal in every state but deleting and deleted: a sandbox whose
// create, resume or fork hangs (a guest that stops answering) must still
// end when its owner or the reaper says so. A delete in a busy state
// cancels the operation in flight (Lifecycle::remove).
inline constexpr Transition kTransitions[] = {
    {SandboxState::kRunning, Action::kPause, SandboxState::kPausing, SandboxState::kPaused},
    {SandboxState::kPaused, Action::kResume, SandboxState::kResuming, SandboxState::kRunning},
    {SandboxState::kRunning, Action::kFork, SandboxState::kForking, SandboxState::kRunning},
    {SandboxState::kRunning, Action::kDelete, SandboxState::kDeleting, SandboxState::kDeleted},
    {SandboxState::kPaused, Action::kDelete, SandboxState::kDeleting, SandboxState::kDeleted},
    {SandboxState::kFailed, Action::kDelete, SandboxState::kDeleting, SandboxState::kDeleted},
    {SandboxState::kCreating, Action::kDelete, SandboxState::kDeleting, SandboxState::kDeleted},
    {SandboxState::kPausing, Action::kDelete, SandboxState::kDeleting, SandboxState::kDeleted},
    {SandboxState::kResuming, Action::kDelete, SandboxState::kDeleting, SandboxState::kDeleted},
    {SandboxState::kForking, Action::kDelete, SandboxState::kDeleting, SandboxState::kDeleted},
};

// Whether a sandbox in `s` has an operation other than a delete in flight.
inline bool busy(SandboxState s) {
  return s == SandboxState::kCreating || s == SandboxState::kPausing ||
         s == SandboxState::kResuming || s == SandboxState::kForking;
}

// The row for `action` in state `from`, or kFailedPrecondition naming the
// current state ("cannot resume a sandbox that is running").
Result<Transition> transition(SandboxState from, Action action);

}  // namespace vessel::ops
