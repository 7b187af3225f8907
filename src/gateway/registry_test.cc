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

policy::Policy withSecret(uint64_t gen, const char* value) {
  boost::json::object p{{"generation", gen}, {"mode", "allowlist"}, {"allow", {"api.a.test"}}};
  if (value) {
    p["credentials"] = boost::json::array{boost::json::object{
        {"name", "c"}, {"hosts", {"api.a.test"}}, {"header", "Authorization"}, {"value", value}}};
  }
  return *policy::Policy::fromJson(p);
}

TEST(RegistryTest, ChangedOrRevokedCredentialResetsConnectionsCarryingIt) {
  Registry r;
  auto src = ip::make_address("10.200.0.2");
  ASSERT_TRUE(r.setSandbox("sb-1", src, withSecret(1, "Bearer old-0123456789abcdef")).ok());
  Sandbox* sb = r.byId("sb-1");
  int resets = 0, plain_resets = 0;
  auto term = std::make_shared<ConnHandle>(
      ConnHandle{"api.a.test", 443, true, [&] { ++resets; }, "Bearer old-0123456789abcdef"});
  auto plain =
      std::make_shared<ConnHandle>(ConnHandle{"api.a.test", 80, false, [&] { ++plain_resets; }});
  r.track(*sb, term);
  r.track(*sb, plain);
  // Same value (a re-send): nothing happens.
  ASSERT_TRUE(r.setSandbox("sb-1", src, withSecret(2, "Bearer old-0123456789abcdef")).ok());
  EXPECT_EQ(resets, 0);
  // A new value: the connection injecting the old one goes.
  ASSERT_TRUE(r.setSandbox("sb-1", src, withSecret(3, "Bearer new-0123456789abcdef")).ok());
  EXPECT_EQ(resets, 1);
  EXPECT_EQ(plain_resets, 0);
  auto term2 = std::make_shared<ConnHandle>(
      ConnHandle{"api.a.test", 443, true, [&] { ++resets; }, "Bearer new-0123456789abcdef"});
  r.track(*sb, term2);
  // Revoked: gone as well.
  ASSERT_TRUE(r.setSandbox("sb-1", src, withSecret(4, nullptr)).ok());
  EXPECT_EQ(resets, 2);
  EXPECT_EQ(plain_resets, 0);
}

// What vesseld reads for the sandboxes' logs: every decision of a sandbox,
// numbered, from where the reader left off; the oldest go past the bound.
TEST(RegistryTest, DecisionsAreReadBackInOrderFromWhereTheReaderLeftOff) {
  Registry r;
  r.record({"tcp", "sb-1", "example.com", "93.184.216.34", 443, true, "allowed"});
  r.record({"dns", "sb-1", "blocked.test", "", 53, false, "not-allowed"});
  r.record({"tcp", "", "", "", 80, false, "unknown-source"});  // no sandbox: not kept
  EXPECT_EQ(r.lastDecision(), 2u);
  auto all = r.decisionsAfter(0, 100);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].seq, 1u);
  EXPECT_EQ(all[0].name, "example.com");
  EXPECT_TRUE(all[0].allowed);
  EXPECT_EQ(all[1].kind, "dns");
  EXPECT_EQ(all[1].reason, "not-allowed");
  EXPECT_FALSE(all[1].allowed);
  auto rest = r.decisionsAfter(1, 100);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].seq, 2u);
  EXPECT_TRUE(r.decisionsAfter(2, 100).empty());
  for (size_t i = 0; i < Registry::kMaxKeptDecisions + 10; ++i)
    r.record({"tcp", "sb-2", "a.test", "", 443, true, "allowed"});
  auto kept = r.decisionsAfter(0, 1'000'000);
  ASSERT_EQ(kept.size(), Registry::kMaxKeptDecisions);
  EXPECT_EQ(kept.back().seq, r.lastDecision());
  EXPECT_EQ(kept.front().seq, r.lastDecision() - Registry::kMaxKeptDecisions + 1);
  EXPECT_EQ(r.decisionsAfter(r.lastDecision() - 3, 2).size(), 2u);
}

}  // namespace
}  // namespace vessel::gateway
