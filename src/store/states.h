#pragma once
// The states of a sandbox and of an operation: one enum each, from the
// store's rows to the API's JSON. The store writes and reads their names
// (the text in the database is the API's text); everything between uses
// the enums, so a typo is a compile error rather than a state nobody sets.
#include <optional>
#include <string_view>

namespace vessel::store {

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
enum class OpState { kPending, kRunning, kDone, kFailed };

inline constexpr SandboxState kAllSandboxStates[] = {
    SandboxState::kCreating, SandboxState::kRunning,  SandboxState::kPausing,
    SandboxState::kPaused,   SandboxState::kResuming, SandboxState::kForking,
    SandboxState::kDeleting, SandboxState::kDeleted,  SandboxState::kFailed};

std::string_view stateName(SandboxState s);
std::optional<SandboxState> parseState(std::string_view s);
std::string_view opStateName(OpState s);
std::optional<OpState> parseOpState(std::string_view s);
// Finished operations never change again.
inline bool finished(OpState s) { return s == OpState::kDone || s == OpState::kFailed; }

}  // namespace vessel::store
