#include "gateway/dns/cache.h"

#include <gtest/gtest.h>

namespace vessel::gateway::dns {
namespace {

using namespace std::chrono_literals;

std::vector<Record> one(const char* addr) {
  return {Record{boost::asio::ip::make_address(addr), 60}};
}

TEST(DnsCacheTest, HitsUntilTheTtlEnds) {
  Cache c(16, 8);
  auto t0 = Cache::Clock::time_point{} + 1000s;
  c.insert("a.test", one("198.51.100.10"), 60s, "sb-1", t0);
  auto hit = c.find("a.test", t0 + 59s);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->front().address.to_string(), "198.51.100.10");
  EXPECT_FALSE(c.find("a.test", t0 + 60s).has_value());
  EXPECT_EQ(c.size(), 0u);
  c.insert("b.test", one("198.51.100.11"), 0s, "sb-1", t0);  // ttl 0: not cached
  EXPECT_FALSE(c.find("b.test", t0).has_value());
}

TEST(DnsCacheTest, AFloodingSandboxChurnsOnlyItsOwnShare) {
  Cache c(64, 16);
  auto t = Cache::Clock::time_point{} + 1000s;
  for (int i = 0; i < 10; ++i)
    c.insert("good" + std::to_string(i) + ".test", one("198.51.100.10"), 300s, "victim", t);
  // Thousands of distinct names from one sandbox.
  for (int i = 0; i < 5000; ++i) {
    t += 1ms;
    c.insert("x" + std::to_string(i) + ".flood.test", one("203.0.113.1"), 300s, "flooder", t);
  }
  EXPECT_EQ(c.ownedBy("flooder"), 16u);
  EXPECT_EQ(c.ownedBy("victim"), 10u);
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(c.find("good" + std::to_string(i) + ".test", t).has_value()) << i;
  // Its newest names are the ones kept.
  EXPECT_TRUE(c.find("x4999.flood.test", t).has_value());
  EXPECT_FALSE(c.find("x0.flood.test", t).has_value());
}

TEST(DnsCacheTest, AFullCacheTakesFromTheLargestOwner) {
  Cache c(8, 6);
  auto t = Cache::Clock::time_point{} + 1000s;
  for (int i = 0; i < 6; ++i) {
    t += 1ms;
    c.insert("big" + std::to_string(i) + ".test", one("198.51.100.1"), 300s, "big", t);
  }
  for (int i = 0; i < 2; ++i) {
    t += 1ms;
    c.insert("small" + std::to_string(i) + ".test", one("198.51.100.2"), 300s, "small", t);
  }
  ASSERT_EQ(c.size(), 8u);
  t += 1ms;
  c.insert("new.test", one("198.51.100.3"), 300s, "third", t);
  EXPECT_EQ(c.size(), 8u);
  EXPECT_EQ(c.ownedBy("big"), 5u);
  EXPECT_EQ(c.ownedBy("small"), 2u);
  EXPECT_FALSE(c.find("big0.test", t).has_value());
  EXPECT_TRUE(c.find("new.test", t).has_value());
}

}  // namespace
}  // namespace vessel::gateway::dns
