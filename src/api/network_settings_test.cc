#include "api/network_settings.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace vessel::api {
namespace {

namespace json = boost::json;

Result<NetworkSettings> parse(std::string_view text) {
  return parseNetworkSettings(json::parse(text), nullptr);
}

TEST(NetworkSettingsTest, InspectIsParsedKeptAndShown) {
  auto s = parse(R"({"mode": "allowlist", "allow": ["a.test", "a.test:8443"],
                     "inspect": ["a.test:8443", "*.b.test"]})");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->inspect, (std::vector<std::string>{"a.test:8443", "*.b.test"}));
  json::object o = networkJson(*s);
  EXPECT_EQ(o.at("inspect").as_array().size(), 2u);
  auto again = parseNetworkSettings(
      json::object{{"mode", o.at("mode")}, {"allow", o.at("allow")}, {"inspect", o.at("inspect")}},
      nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->inspect, s->inspect);
}

TEST(NetworkSettingsTest, BadInspectionsAreRefused) {
  EXPECT_FALSE(parse(R"({"mode": "none", "inspect": ["a.test"]})").ok());
  EXPECT_FALSE(parse(R"({"mode": "full", "inspect": ["a.test:99999"]})").ok());
  EXPECT_FALSE(parse(R"({"mode": "full", "inspect": "a.test"})").ok());
  EXPECT_FALSE(parse(R"({"mode": "full", "inspect": [1]})").ok());
}

// IP and CIDR entries beside names (issue 25): accepted in allow (and, in
// full mode, only they, as exceptions to deny), deny holds only them, and
// malformed or never-openable ones are refused here, at the edge.
TEST(NetworkSettingsTest, AddressRulesAndDenyRanges) {
  auto s = parse(R"({"mode": "allowlist", "allow": ["a.test", "203.0.113.7", "[2001:db8::1]:443"],
                     "deny": ["198.51.100.0/24"]})");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->allow, (std::vector<std::string>{"a.test", "203.0.113.7", "[2001:db8::1]:443"}));
  EXPECT_EQ(s->deny, std::vector<std::string>{"198.51.100.0/24"});
  EXPECT_EQ(networkJson(*s).at("deny").as_array().size(), 1u);
  auto full = parse(R"({"mode": "full", "allow": ["8.8.8.8"], "deny": ["8.8.8.0/24"]})");
  ASSERT_TRUE(full.ok()) << full.error().message();
  EXPECT_EQ(full->allow, std::vector<std::string>{"8.8.8.8"});
  for (const char* bad : {
           R"({"mode": "full", "allow": ["a.test"], "deny": ["8.8.8.0/24"]})",
           R"({"mode": "full", "deny": ["a.test"]})",
           R"({"mode": "full", "deny": ["8.8.8.8:53"]})",
           R"({"mode": "none", "deny": ["8.8.8.8"]})",
           R"({"mode": "allowlist", "allow": ["1.2.3.4/33"]})",
           R"({"mode": "allowlist", "allow": ["127.1"]})",
           R"({"mode": "allowlist", "allow": ["fe80::1%eth0"]})",
           R"({"mode": "allowlist", "allow": ["10.0.0.0/8"]})",
           R"({"mode": "allowlist", "allow": ["169.254.169.254:80"]})",
           R"({"mode": "full", "inspect": ["203.0.113.7"]})",
       })
    EXPECT_FALSE(parse(bad).ok()) << bad;
}

TEST(NetworkSettingsTest, NetworkRequestTakesCredentialsBesideTheNetworkFields) {
  auto s = parseNetworkRequest(
      R"({"mode": "allowlist", "allow": ["a.test"], "credentials": ["gh-token"]})");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->mode, "allowlist");
  EXPECT_EQ(s->allow, std::vector<std::string>{"a.test"});
  EXPECT_EQ(s->credentials, std::vector<std::string>{"gh-token"});
  for (const char* bad : {"", "[]", "{", R"({"mode": "some"})", R"({"credentials": [""]})",
                          R"({"network": {"mode": "none"}})"})
    EXPECT_FALSE(parseNetworkRequest(bad).ok()) << bad;
}

}  // namespace
}  // namespace vessel::api
