#pragma once
// What the E2B REST files share (rest*.cc): E2B's two states, its 404, its log.
#include <string>

#include "base/log.h"
#include "base/result.h"
#include "store/store.h"

namespace vessel::e2b {

inline Logger e2bLog() { return Logger("e2b"); }

// E2B knows two states; Vessel's transient ones show as where they lead.
inline bool running(store::SandboxState s) {
  using store::SandboxState;
  return s == SandboxState::kRunning || s == SandboxState::kForking || s == SandboxState::kResuming;
}
inline bool paused(store::SandboxState s) {
  using store::SandboxState;
  return s == SandboxState::kPaused || s == SandboxState::kPausing;
}

inline Error notFound(const std::string& id) {
  return Error(Code::kNotFound, "sandbox " + id + " not found");
}

}  // namespace vessel::e2b
