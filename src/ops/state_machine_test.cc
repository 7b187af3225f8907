#include "ops/state_machine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vessel::ops {
namespace {

TEST(StateMachineTest, LegalRequestsMoveThroughTheirStates) {
  auto t = transition(SandboxState::kRunning, Action::kPause);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->during, SandboxState::kPausing);
  EXPECT_EQ(t->done, SandboxState::kPaused);
  EXPECT_TRUE(transition(SandboxState::kPaused, Action::kResume).ok());
  EXPECT_TRUE(transition(SandboxState::kFailed, Action::kDelete).ok());
  auto f = transition(SandboxState::kRunning, Action::kFork);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->during, SandboxState::kForking);
  EXPECT_EQ(f->done, SandboxState::kRunning);
}

TEST(StateMachineTest, IllegalRequestsNameTheCurrentState) {
  auto t = transition(SandboxState::kRunning, Action::kResume);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code(), Code::kFailedPrecondition);
  EXPECT_THAT(t.error().message(), ::testing::HasSubstr("running"));
  // Nothing but a delete may happen to a sandbox while another operation
  // changes it; nothing at all once it is being deleted.
  for (auto s : {SandboxState::kCreating, SandboxState::kPausing, SandboxState::kResuming,
                 SandboxState::kForking, SandboxState::kDeleting, SandboxState::kDeleted})
    for (auto a : {Action::kPause, Action::kResume, Action::kFork})
      EXPECT_FALSE(transition(s, a).ok()) << stateName(s) << " " << actionName(a);
  EXPECT_FALSE(transition(SandboxState::kDeleting, Action::kDelete).ok());
  EXPECT_FALSE(transition(SandboxState::kDeleted, Action::kDelete).ok());
}

TEST(StateMachineTest, DeleteIsAcceptedInEveryStateButDeletingAndDeleted) {
  for (auto s : store::kAllSandboxStates) {
    bool want = s != SandboxState::kDeleting && s != SandboxState::kDeleted;
    auto t = transition(s, Action::kDelete);
    EXPECT_EQ(t.ok(), want) << stateName(s);
    if (t.ok()) EXPECT_EQ(t->done, SandboxState::kDeleted);
  }
}

TEST(StateMachineTest, NamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(SandboxState::kFailed); ++i) {
    auto s = static_cast<SandboxState>(i);
    EXPECT_EQ(parseState(stateName(s)), s);
  }
  EXPECT_FALSE(parseState("bogus").has_value());
  EXPECT_EQ(stateName(SandboxState::kForking), "forking");
}

}  // namespace
}  // namespace vessel::ops
