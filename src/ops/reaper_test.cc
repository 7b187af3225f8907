// The reaper: what it does with each expired sandbox, decided row by row
// (decideReap, no store), then carried out by the lifecycle over a fake
// node, a real SQLite store and a fake clock.
#include "ops/reaper.h"

#include "ops/testing/lifecycle_fixture.h"

namespace vessel::ops {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using LifecycleTest = testing::LifecycleTest;

using K = ReapStep::Kind;

store::SandboxRecord expired(SandboxState st, bool pause_on_timeout, int64_t created_ms,
                             int64_t expires_ms) {
  store::SandboxRecord sb;
  sb.id = "sb-1";
  sb.state = st;
  sb.pause_on_timeout = pause_on_timeout;
  sb.created_ms = created_ms;
  sb.expires_ms = expires_ms;
  sb.idle_timeout_s = 30;
  return sb;
}

struct Row {
  SandboxState state;
  bool pause_on_timeout;
  bool past_cap;  // now is past creation + the deployment's cap
  K kind;
};

// Every state, asked to pause or not, before and after the cap.
const Row kTable[] = {
    // Not asked to pause: every deletable state is ended; deleting ones
    // are on their way already.
    {SandboxState::kCreating, false, false, K::kDelete},
    {SandboxState::kRunning, false, false, K::kDelete},
    {SandboxState::kPausing, false, false, K::kDelete},
    {SandboxState::kPaused, false, false, K::kDelete},
    {SandboxState::kResuming, false, false, K::kDelete},
    {SandboxState::kForking, false, false, K::kDelete},
    {SandboxState::kFailed, false, false, K::kDelete},
    {SandboxState::kDeleting, false, false, K::kLeave},
    {SandboxState::kDeleted, false, false, K::kLeave},
    // Asked to pause, before the cap: a running one pauses, a paused one
    // waits until the cap, one on its way waits to be running, a failed
    // one is ended.
    {SandboxState::kRunning, true, false, K::kPause},
    {SandboxState::kPaused, true, false, K::kKeepUntilCap},
    {SandboxState::kPausing, true, false, K::kKeepUntilCap},
    {SandboxState::kCreating, true, false, K::kLeave},
    {SandboxState::kResuming, true, false, K::kLeave},
    {SandboxState::kForking, true, false, K::kLeave},
    {SandboxState::kFailed, true, false, K::kDelete},
    {SandboxState::kDeleting, true, false, K::kLeave},
    // The cap ends every sandbox however it asked to be kept.
    {SandboxState::kRunning, true, true, K::kDelete},
    {SandboxState::kPaused, true, true, K::kDelete},
    {SandboxState::kResuming, true, true, K::kDelete},
    {SandboxState::kDeleting, true, true, K::kLeave},
};

TEST(ReaperTest, EveryStateAgainstPauseOnTimeoutAndTheCap) {
  constexpr int64_t kMax = 1000;  // seconds
  for (const Row& r : kTable) {
    int64_t now = r.past_cap ? kMax * 1000 + 1 : 500'000;
    auto sb = expired(r.state, r.pause_on_timeout, 0, now - 1);
    ReapStep s = decideReap(sb, now, kMax);
    std::string row = std::string(stateName(r.state)) +
                      (r.pause_on_timeout ? ", pause on timeout" : "") +
                      (r.past_cap ? ", past the cap" : "");
    EXPECT_EQ(s.kind, r.kind) << row;
    if (s.kind != K::kLeave) {
      EXPECT_TRUE(s.lifetime) << row;
      EXPECT_THAT(s.why, HasSubstr("its lifetime ended at")) << row;
    }
  }
}

TEST(ReaperTest, IdleIsToldApartFromTheLifetime) {
  // Listed as expired with its lifetime still ahead: idle past its timeout.
  auto idle = decideReap(expired(SandboxState::kRunning, false, 0, 900'000), 60'000, 1000);
  EXPECT_EQ(idle.kind, K::kDelete);
  EXPECT_FALSE(idle.lifetime);
  EXPECT_EQ(idle.why, "idle for 30 s");
  // No lifetime at all (expires_ms 0) is never a lifetime's end.
  auto none = decideReap(expired(SandboxState::kRunning, true, 0, 0), 60'000, 1000);
  EXPECT_EQ(none.kind, K::kPause);
  EXPECT_FALSE(none.lifetime);
}

TEST_F(LifecycleTest, TheReaperEndsAHungResumeAtItsLifetime) {
  CreateRequest c;
  c.lifetime_s = 60;
  std::string id = created(c);
  ASSERT_TRUE(lc_->pause("t1", id).ok());
  drain();
  node_->hang.insert(id);
  ASSERT_TRUE(lc_->resume("t1", id).ok());
  drain();
  EXPECT_EQ(lc_->reaper().reapOnce(), 0);  // not yet
  clock_.advance(61s);
  EXPECT_EQ(lc_->reaper().reapOnce(), 1);
  drain();
  EXPECT_EQ(state(id), "deleted");
  EXPECT_FALSE(node_->hanging(id));
}

TEST_F(LifecycleTest, TheReaperEndsIdleSandboxesByTheClock) {
  CreateRequest c;
  c.timeout_s = 30;
  std::string id = created(c);
  clock_.advance(20s);
  lc_->noteActivity(id);
  clock_.advance(20s);
  EXPECT_EQ(lc_->reaper().reapOnce(), 0) << "activity restarted its idle clock";
  clock_.advance(11s);
  EXPECT_EQ(lc_->reaper().reapOnce(), 1);
  drain();
  EXPECT_EQ(state(id), "deleted");
  bool expired = false;
  for (auto& e : eventTypes(id)) expired = expired || e.rfind("sandbox.expired", 0) == 0;
  EXPECT_TRUE(expired);
}

// On-timeout pause (E2B's lifecycle.onTimeout 'pause'): the reaper pauses
// instead of deleting, the paused sandbox waits for a resume until the
// deployment's cap, and each resume starts its lifetime again.
TEST_F(LifecycleTest, ATimeoutPausesWhenAskedAndTheCapStillEnds) {
  lc_->setPolicy(Policy{.max_lifetime_s = 1000});
  CreateRequest c;
  c.timeout_s = 0;
  c.lifetime_s = 60;
  c.pause_on_timeout = true;
  std::string id = created(c);
  int64_t t0 = clock_.nowMs();
  clock_.advance(61s);
  EXPECT_EQ(lc_->reaper().reapOnce(), 1);
  drain();
  EXPECT_EQ(state(id), "paused");
  EXPECT_EQ(node_->count("pause " + id), 1);
  EXPECT_EQ(node_->count("destroy " + id), 0);
  EXPECT_EQ(lc_->get("t1", id)->expires_ms, t0 + 1000'000) << "kept until the cap";
  bool paused_event = false;
  for (auto& e : eventTypes(id))
    paused_event = paused_event || (e.rfind("sandbox.expired", 0) == 0 &&
                                    e.find("\"action\":\"pause\"") != std::string::npos);
  EXPECT_TRUE(paused_event);
  clock_.advance(300s);
  EXPECT_EQ(lc_->reaper().reapOnce(), 0) << "a paused sandbox is not ended by its lifetime";
  EXPECT_EQ(state(id), "paused");

  // A resume starts the lifetime it was created with again.
  ASSERT_TRUE(lc_->resume("t1", id).ok());
  drain();
  EXPECT_EQ(state(id), "running");
  EXPECT_EQ(lc_->get("t1", id)->expires_ms, clock_.nowMs() + 60'000);
  clock_.advance(61s);
  EXPECT_EQ(lc_->reaper().reapOnce(), 1);
  drain();
  EXPECT_EQ(state(id), "paused");
  EXPECT_EQ(node_->count("pause " + id), 2);

  // The cap ends it whatever it asked for.
  clock_.advance(600s);
  EXPECT_EQ(lc_->reaper().reapOnce(), 1);
  drain();
  EXPECT_EQ(state(id), "deleted");
}

TEST_F(LifecycleTest, ADiskOnlyTimeoutPauseAndAFailedOneThatEndsTheSandbox) {
  CreateRequest c;
  c.lifetime_s = 60;
  c.pause_on_timeout = true;
  c.pause_memory = false;
  std::string disk = created(c);
  c.pause_memory = true;
  std::string broken = created(c);
  node_->fail.insert(broken);  // its pause fails; it is still running
  clock_.advance(61s);
  EXPECT_EQ(lc_->reaper().reapOnce(), 2);
  drain();
  EXPECT_EQ(state(disk), "paused");
  EXPECT_EQ(node_->count("pause-disk " + disk), 1);
  EXPECT_EQ(state(broken), "deleted") << "a timeout that cannot pause ends it";
  // By hand too: pause without memory reaches the node as such.
  std::string plain = created();
  ASSERT_TRUE(lc_->pause("t1", plain, false).ok());
  drain();
  EXPECT_EQ(node_->count("pause-disk " + plain), 1);
}

TEST_F(LifecycleTest, ATimeoutThatCannotPauseDeletes) {
  CreateRequest c;
  c.lifetime_s = 60;
  c.pause_on_timeout = true;
  std::string id = created(c);
  Policy pol;
  pol.state_dir = dir_;
  pol.min_free_disk_mib = uint64_t{1} << 40;  // pauses are refused: the state disk is "full"
  lc_->setPolicy(pol);
  clock_.advance(61s);
  EXPECT_EQ(lc_->reaper().reapOnce(), 1);
  drain();
  EXPECT_EQ(state(id), "deleted") << "it does not run on past its timeout";
  EXPECT_EQ(node_->count("pause " + id), 0);
}

TEST_F(LifecycleTest, OnTimeoutCombinationsAreChecked) {
  CreateRequest c;
  c.tenant = "t1";
  c.auto_resume = true;  // without a pause on timeout
  EXPECT_EQ(lc_->create(c).error().code(), Code::kInvalidArgument);
  c.pause_on_timeout = true;
  c.pause_memory = false;  // auto-resume of a disk-only pause
  EXPECT_EQ(lc_->create(c).error().code(), Code::kInvalidArgument);
  c.auto_resume = false;
  c.pause_on_timeout = false;  // a disk-only pause without pausing
  EXPECT_EQ(lc_->create(c).error().code(), Code::kInvalidArgument);
  c.pause_on_timeout = true;
  auto ok = lc_->create(c);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_TRUE(ok->sandbox.pause_on_timeout);
  EXPECT_FALSE(ok->sandbox.pause_memory);
}

}  // namespace
}  // namespace vessel::ops
