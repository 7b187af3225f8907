#include "gateway/registry.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace vessel::gateway {
namespace {

namespace ip = boost::asio::ip;

policy::Policy allow(uint64_t gen, std::initializer_list<const char*> names) {
  boost::json::array a;
  for (const char* n : names) a.emplace_back(n);
  return *policy::Policy::fromJson(
      boost::json::object{{"generation", gen}, {"mode", "allowlist"}, {"allow", a}});
}

TEST(RegistryTest, MapsSourceToSandbox) {
  Registry r;
  ASSERT_TRUE(r.setSandbox("sb-1", ip::make_address("10.200.0.2"), allow(1, {"a.test"})).ok());
  ASSERT_TRUE(r.setSandbox("sb-2", ip::make_address("10.200.0.6"), allow(1, {"b.test"})).ok());
  EXPECT_EQ(r.bySource(ip::make_address("10.200.0.2"))->id, "sb-1");
  EXPECT_EQ(r.bySource(ip::make_address("10.200.0.6"))->id, "sb-2");
  EXPECT_EQ(r.bySource(ip::make_address("10.200.0.10")), nullptr);
  // One source, one sandbox.
  EXPECT_FALSE(r.setSandbox("sb-3", ip::make_address("10.200.0.2"), allow(1, {})).ok());
}

TEST(RegistryTest, OlderGenerationIsRefused) {
  Registry r;
  ASSERT_TRUE(r.setSandbox("sb-1", ip::make_address("10.200.0.2"), allow(5, {"a.test"})).ok());
  EXPECT_FALSE(r.setSandbox("sb-1", ip::make_address("10.200.0.2"), allow(4, {})).ok());
  EXPECT_TRUE(r.bySource(ip::make_address("10.200.0.2"))->policy.allows("a.test", 443));
}

TEST(RegistryTest, PolicyChangeResetsOnlyDisallowedConnections) {
  Registry r;
  ASSERT_TRUE(
      r.setSandbox("sb-1", ip::make_address("10.200.0.2"), allow(1, {"a.test", "b.test"})).ok());
  Sandbox* sb = r.byId("sb-1");
  int a_resets = 0, b_resets = 0;
  auto a = std::make_shared<ConnHandle>(ConnHandle{"a.test", 443, false, [&] { ++a_resets; }});
  auto b = std::make_shared<ConnHandle>(ConnHandle{"b.test", 443, false, [&] { ++b_resets; }});
  r.track(*sb, a);
  r.track(*sb, b);
  ASSERT_TRUE(r.setSandbox("sb-1", ip::make_address("10.200.0.2"), allow(2, {"a.test"})).ok());
  EXPECT_EQ(a_resets, 0);
  EXPECT_EQ(b_resets, 1);
  ASSERT_TRUE(r.removeSandbox("sb-1").ok());
  EXPECT_EQ(a_resets, 1);
  EXPECT_EQ(r.counters().at("tcp_deny_policy-changed"), 2u);
}

}  // namespace
}  // namespace vessel::gateway
