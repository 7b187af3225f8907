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
