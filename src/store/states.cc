#include "store/states.h"

#include <iterator>

namespace vessel::store {

namespace {
constexpr std::string_view kStateNames[] = {"creating", "running",  "pausing", "paused", "resuming",
                                            "forking",  "deleting", "deleted", "failed"};
constexpr std::string_view kOpStateNames[] = {"pending", "running", "done", "failed"};
}  // namespace

std::string_view stateName(SandboxState s) { return kStateNames[static_cast<int>(s)]; }

std::optional<SandboxState> parseState(std::string_view s) {
  for (size_t i = 0; i < std::size(kStateNames); ++i)
    if (kStateNames[i] == s) return static_cast<SandboxState>(i);
  return std::nullopt;
}

std::string_view opStateName(OpState s) { return kOpStateNames[static_cast<int>(s)]; }

std::optional<OpState> parseOpState(std::string_view s) {
  for (size_t i = 0; i < std::size(kOpStateNames); ++i)
    if (kOpStateNames[i] == s) return static_cast<OpState>(i);
  return std::nullopt;
}

}  // namespace vessel::store
