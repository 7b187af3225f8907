#include "ops/recovery.h"

#include <gtest/gtest.h>

namespace vessel::ops {
namespace {

using K = RecoveryStep::Kind;
constexpr auto kRun = SandboxState::kRunning;
constexpr auto kPau = SandboxState::kPaused;

struct Row {
  const char* op;                       // the newest unfinished operation's kind
  std::optional<SandboxState> holding;  // what the node took over
  SandboxState recorded;
  K kind;
  SandboxState state;  // for kSettle / kSettleFailOp
  Action action;       // for kRerun
};

// The whole table: every operation kind against every outcome of the
// take-over.
const Row kTable[] = {
    // No operation in flight: what is there is the truth.
    {"", kRun, kRun, K::kSettle, kRun, Action::kDelete},
    {"", kPau, kPau, K::kSettle, kPau, Action::kDelete},
    {"", std::nullopt, kRun, K::kFail, SandboxState::kFailed, Action::kDelete},
    {"", std::nullopt, SandboxState::kDeleting, K::kSettle, SandboxState::kDeleted,
     Action::kDelete},
    {"", kRun, SandboxState::kDeleting, K::kRerun, SandboxState::kFailed, Action::kDelete},
    // create: ready or discarded.
    {"create", kRun, SandboxState::kCreating, K::kSettle, kRun, Action::kDelete},
    {"create", std::nullopt, SandboxState::kCreating, K::kFail, SandboxState::kFailed,
     Action::kDelete},
    // pause: done, again, or lost.
    {"pause", kPau, SandboxState::kPausing, K::kSettle, kPau, Action::kDelete},
    {"pause", kRun, SandboxState::kPausing, K::kRerun, SandboxState::kFailed, Action::kPause},
    {"pause", std::nullopt, SandboxState::kPausing, K::kFail, SandboxState::kFailed,
     Action::kDelete},
    // resume: done, again, or lost.
    {"resume", kRun, SandboxState::kResuming, K::kSettle, kRun, Action::kDelete},
    {"resume", kPau, SandboxState::kResuming, K::kRerun, SandboxState::kFailed, Action::kResume},
    {"resume", std::nullopt, SandboxState::kResuming, K::kFail, SandboxState::kFailed,
     Action::kDelete},
    // delete: again on whatever is left, or it has happened.
    {"delete", kRun, SandboxState::kDeleting, K::kRerun, SandboxState::kFailed, Action::kDelete},
    {"delete", kPau, SandboxState::kDeleting, K::kRerun, SandboxState::kFailed, Action::kDelete},
    {"delete", std::nullopt, SandboxState::kDeleting, K::kSettle, SandboxState::kDeleted,
     Action::kDelete},
    // fork: the parent carries on, the operation (its copies) failed.
    {"fork", kRun, SandboxState::kForking, K::kSettleFailOp, kRun, Action::kDelete},
    {"fork", std::nullopt, SandboxState::kForking, K::kFail, SandboxState::kFailed,
     Action::kDelete},
};

TEST(RecoveryTest, EveryOperationKindAgainstEveryOutcome) {
  for (const Row& r : kTable) {
    RecoveryStep s = decideRecovery(r.op, r.holding, r.recorded);
    std::string row = std::string("op '") + r.op + "', holding " +
                      (r.holding ? std::string(stateName(*r.holding)) : "nothing") + ", recorded " +
                      std::string(stateName(r.recorded));
    EXPECT_EQ(s.kind, r.kind) << row;
    if (s.kind == K::kSettle || s.kind == K::kSettleFailOp) EXPECT_EQ(s.state, r.state) << row;
    if (s.kind == K::kRerun) EXPECT_EQ(s.action, r.action) << row;
    if (s.kind == K::kFail || s.kind == K::kSettleFailOp) EXPECT_FALSE(s.why.empty()) << row;
  }
}

TEST(RecoveryTest, NothingIsLeftPending) {
  // Whatever the kind and outcome, a step is chosen that ends the
  // operation or runs it again: never "leave it".
  for (const char* op : {"", "create", "pause", "resume", "delete", "fork", "build"})
    for (auto h : {std::optional<SandboxState>(kRun), std::optional<SandboxState>(kPau),
                   std::optional<SandboxState>()})
      for (auto rec : store::kAllSandboxStates) {
        RecoveryStep s = decideRecovery(op, h, rec);
        if (s.kind == K::kRerun) EXPECT_TRUE(h.has_value()) << op;
        if (s.kind == K::kSettle && !h) EXPECT_EQ(s.state, SandboxState::kDeleted) << op;
      }
}

}  // namespace
}  // namespace vessel::ops
