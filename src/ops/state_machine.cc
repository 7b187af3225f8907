#include "ops/state_machine.h"

#include <string>

namespace vessel::ops {

std::string_view actionName(Action a) {
  switch (a) {
    case Action::kPause: return "pause";
    case Action::kResume: return "resume";
    case Action::kDelete: return "delete";
    case Action::kFork: return "fork";
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
