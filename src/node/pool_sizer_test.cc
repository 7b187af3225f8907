// The warm pool's sizing policy with a clock the test moves by hand.
#include "node/pool_sizer.h"

#include <gtest/gtest.h>

namespace vessel::node {
namespace {

using namespace std::chrono_literals;
using TP = PoolSizer::Clock::time_point;

PoolSizer adaptive(size_t floor, uint64_t budget_mib, uint64_t cost_mib) {
  PoolSizer::Options o;
  o.floor = floor;
  o.budget_mib = budget_mib;
  o.idle = 60s;
  PoolSizer s(o);
  s.setVmCost(cost_mib);
  return s;
}

TEST(PoolSizer, WithoutABudgetTheSizeIsTheFloorWhateverTheDemand) {
  PoolSizer s({.floor = 2, .budget_mib = 0});
  TP t{};
  for (int i = 0; i < 10; ++i) s.onCreate(t + i * 1ms, false);
  EXPECT_EQ(s.target(t + 10ms), 2u);
  EXPECT_FALSE(s.adaptive());
}

TEST(PoolSizer, ABurstGrowsThePoolToTheBurst) {
  auto s = adaptive(2, 1024, 32);
  TP t{};
  EXPECT_EQ(s.target(t), 2u);
  // Eight creates at once: two find a VM, six do not.
  for (int i = 0; i < 8; ++i) s.onCreate(t, i < 2);
  EXPECT_EQ(s.target(t), 8u);
}

TEST(PoolSizer, HitsDoNotGrowIt) {
  auto s = adaptive(3, 1024, 32);
  TP t{};
  for (int i = 0; i < 50; ++i) s.onCreate(t + i * 100ms, true);
  EXPECT_EQ(s.target(t + 5s), 3u);
}

TEST(PoolSizer, AStreamFasterThanTheRefillGrowsItToTheBudget) {
  auto s = adaptive(2, 256, 32);  // room for 8
  EXPECT_EQ(s.ceiling(), 8u);
  TP t{};
  for (int i = 0; i < 40; ++i) s.onCreate(t + i * 200ms, false);
  EXPECT_EQ(s.target(t + 8s), 8u);
}

TEST(PoolSizer, UnmeasuredVmsCountAtTheGuestsNominalMemory) {
  PoolSizer s({.floor = 1, .budget_mib = 1024, .vm_cost_mib = 256});
  EXPECT_EQ(s.ceiling(), 4u);
  TP t{};
  for (int i = 0; i < 10; ++i) s.onCreate(t, false);
  EXPECT_EQ(s.target(t), 4u);
  s.setVmCost(64);  // measured: the same budget holds more
  EXPECT_EQ(s.ceiling(), 16u);
  s.onCreate(t, false);
  EXPECT_EQ(s.target(t), 5u);
}

TEST(PoolSizer, IdleHalvesWhatIsAboveTheFloorEachPeriod) {
  auto s = adaptive(2, 4096, 32);
  TP t{};
  for (int i = 0; i < 10; ++i) s.onCreate(t, false);
  ASSERT_EQ(s.target(t), 12u);
  EXPECT_EQ(s.target(t + 59s), 12u);
  EXPECT_EQ(s.target(t + 60s), 7u);   // 2 + 10/2
  EXPECT_EQ(s.target(t + 120s), 4u);  // 2 + 10/4
  EXPECT_EQ(s.target(t + 180s), 3u);
  EXPECT_EQ(s.target(t + 240s), 2u);
  EXPECT_EQ(s.target(t + 24h), 2u);  // never below the floor
}

TEST(PoolSizer, ACreateAfterIdleGrowsFromWhatWasLeft) {
  auto s = adaptive(0, 4096, 32);
  TP t{};
  for (int i = 0; i < 8; ++i) s.onCreate(t, false);
  ASSERT_EQ(s.target(t), 8u);
  s.onCreate(t + 60s, false);  // decayed to 4, then one miss
  EXPECT_EQ(s.target(t + 60s), 5u);
  EXPECT_EQ(s.target(t + 119s), 5u);  // the idle period starts again at that create
  EXPECT_EQ(s.target(t + 120s), 2u);
}

TEST(PoolSizer, TheBudgetWinsOverTheFloor) {
  auto s = adaptive(4, 128, 64);
  EXPECT_EQ(s.target(TP{}), 2u);
}

TEST(PoolSizer, AFloorRaisedLaterIsHeld) {
  auto s = adaptive(1, 1024, 32);
  s.setFloor(5);
  EXPECT_EQ(s.target(TP{} + 1h), 5u);
}

}  // namespace
}  // namespace vessel::node
