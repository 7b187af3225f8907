// /proc parsing for sandbox metrics: the awkward comm field, and this
// process's own real numbers.
#include "os/proc_usage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>

namespace vessel::os {
namespace {

TEST(ProcUsage, ParsesStatWithAnAwkwardComm) {
  std::string stat =
      "4242 (qemu (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 5 0 0 20 0 3 0 123 456 789";
  auto t = parseStatTicks(stat);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->cpu, 42u);
  EXPECT_EQ(t->start, 123u);
  EXPECT_FALSE(parseStatTicks("4242 (q) S 1 2").ok());
  EXPECT_FALSE(parseStatTicks("no comm").ok());
  EXPECT_FALSE(parseStatTicks("1 (q) S 1 1 1 0 -1 0 0 0 0 0 x 5 0 0 0 0 0 0 0 1").ok());
}

TEST(ProcUsage, ParsesVmRss) {
  EXPECT_EQ(parseStatusRssBytes("Name:\tq\nVmRSS:\t  2048 kB\nThreads: 3\n").value_or(0), 2097152u);
  EXPECT_EQ(parseStatusRssBytes("Name:\tkthreadd\n").value_or(1), 0u);
  EXPECT_FALSE(parseStatusRssBytes("Name:\tq\nVmRSS:\t2048 MB\n").ok());
}

TEST(ProcUsage, ThisProcessUsesSomething) {
  auto start = std::chrono::steady_clock::now();
  volatile uint64_t x = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(50)) x = x + 1;
  auto u = procUsage(::getpid());
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_GT(u->rss_bytes, 1u << 20);
  EXPECT_GT(u->cpu_ticks, 0u);
  auto up = uptimeTicks();
  ASSERT_TRUE(up.ok()) << up.error().message();
  EXPECT_GE(*up, u->start_ticks);
  EXPECT_FALSE(procUsage(0).ok());
}

}  // namespace
}  // namespace vessel::os
