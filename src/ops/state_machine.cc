#include "ops/state_machine.h"

#include <string>

namespace vessel::ops {

namespace {
constexpr std::string_view kStateNames[] = {"creating", "running",  "pausing", "paused", "resuming",
                                            "forking",  "deleting", "deleted", "failed"};
}

std::string_view stateName(SandboxState s) { return kStateNames[static_cast<int>(s)]; }

std::optional<SandboxState> parseState(std::string_view s) {
  for (size_t i = 0; i < std::size(kStateNames); ++i)
    if (kStateNames[i] == s) return static_cast<SandboxState>(i);
  return std::nullopt;
}

std::string_view actionName(Action a) {
  switch (a) {
    case Action::kPause: return "pause";
    case Action::kResume: return "resume";
    case Action::kDelete: return "delete";
    case Action::kFork: return "fork";
  }
  return "?";
}

std::string_view opStateName(OpState s) {
  switch (s) {
    case OpState::kPending: return "pending";
    case OpState::kRunning: return "running";
    case OpState::kDone: return "done";
    case OpState::kFailed: return "failed";
  }
  return "?";
}

Result<Transition> transition(SandboxState from, Action action) {
  for (const Transition& t : kTransitions)
    if (t.from == from && t.action == action) return t;
  return Error(Code::kFailedPrecondition, "cannot " + std::string(actionName(action)) +
                                              " a sandbox that is " + std::string(stateName(from)));
}

}  // namespace vessel::ops
