#include "gateway/policy/policy.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "gateway/policy/address_class.h"

namespace vessel::gateway::policy {
namespace {

namespace ip = boost::asio::ip;

Policy allow(std::initializer_list<const char*> rules) {
  boost::json::array a;
  for (const char* r : rules) a.emplace_back(r);
  auto p =
      Policy::fromJson(boost::json::object{{"generation", 1}, {"mode", "allowlist"}, {"allow", a}});
  EXPECT_TRUE(p.ok()) << p.error().message();
  return *p;
}

TEST(PolicyTest, ExactNamesAndDefaultPorts) {
  Policy p = allow({"pypi.org"});
  EXPECT_TRUE(p.allows("pypi.org", 443));
  EXPECT_TRUE(p.allows("pypi.org", 80));
  EXPECT_FALSE(p.allows("pypi.org", 8443));
  EXPECT_FALSE(p.allows("pypi.org", 22));
  for (const char* n : {"evilpypi.org", "pypi.org.x.test", "pypi.orgx", "a.pypi.org"}) {
    EXPECT_FALSE(p.allows(n, 443)) << n;
    EXPECT_FALSE(p.allowsName(n)) << n;
  }
}

TEST(PolicyTest, WildcardByWholeLabel) {
  Policy p = allow({"*.pypi.org"});
  EXPECT_TRUE(p.allows("files.pypi.org", 443));
  EXPECT_TRUE(p.allows("a.b.pypi.org", 443));
  EXPECT_FALSE(p.allows("pypi.org", 443));
  EXPECT_FALSE(p.allows("evilpypi.org", 443));
  EXPECT_FALSE(p.allows("xpypi.org", 443));
}

TEST(PolicyTest, ExplicitPorts) {
  Policy p = allow({"a.test:8443", "b.test"});
  EXPECT_TRUE(p.allows("a.test", 8443));
  EXPECT_FALSE(p.allows("a.test", 443));
  EXPECT_TRUE(p.allowsName("a.test"));
}

TEST(PolicyTest, BadRulesAreRefused) {
  for (const char* r :
       {"*.test", "*", "a.test:0", "a.test:x", "1.2.3.4", "a..test", "*.*.a.test"}) {
    EXPECT_FALSE(parseRule(r).ok()) << r;
  }
}

TEST(PolicyTest, ModesNoneAndFull) {
  auto none = Policy::fromJson(boost::json::object{{"generation", 1}, {"mode", "none"}});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->allowsName("a.test"));
  auto full = Policy::fromJson(boost::json::object{{"generation", 2}, {"mode", "full"}});
  ASSERT_TRUE(full.ok());
  EXPECT_TRUE(full->allows("anything.test", 22));
  EXPECT_FALSE(Policy::fromJson(boost::json::object{{"mode", "full"}}).ok());
  EXPECT_FALSE(Policy::fromJson(boost::json::object{{"generation", 1}, {"mode", "open"}}).ok());
}

TEST(PolicyTest, Credentials) {
  auto p = Policy::fromJson(boost::json::parse(R"({"generation":3,"mode":"allowlist",
    "allow":["api.a.test"],"credentials":[{"name":"c","hosts":["API.a.test"],
    "header":"Authorization","value":"Bearer s-0123456789abcdef"}]})"));
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_NE(p->credentialFor("api.a.test"), nullptr);
  EXPECT_EQ(p->credentialFor("api.a.test")->header, "authorization");
  EXPECT_EQ(p->credentialFor("a.test"), nullptr);
  EXPECT_FALSE(Policy::fromJson(boost::json::parse(R"({"generation":3,"mode":"allowlist",
    "credentials":[{"name":"c","hosts":["a.test"],"header":"X","value":"a\r\nHost: x"}]})"))
                   .ok());
  // Too short to scrub reliably: the value, or its token after the scheme.
  for (const char* v : {"0123456789abcde", "Bearer 0123456789abcde"}) {
    EXPECT_FALSE(Policy::fromJson(boost::json::object{{"generation", 3},
                                                      {"mode", "allowlist"},
                                                      {"credentials",
                                                       boost::json::array{boost::json::object{
                                                           {"name", "c"},
                                                           {"hosts", boost::json::array{"a.test"}},
                                                           {"header", "X"},
                                                           {"value", v}}}}})
                     .ok())
        << v;
  }
}

TEST(AddressClassTest, InwardAddressesAreRefused) {
  AddressClassifier c;
  c.addDenied(*parseCidr("203.0.113.200/32"));
  for (const char* a : {"127.0.0.1",
                        "127.0.0.2",
                        "0.0.0.0",
                        "10.1.2.3",
                        "172.16.0.1",
                        "172.31.255.255",
                        "192.168.1.1",
                        "100.64.0.1",
                        "100.100.100.200",
                        "169.254.169.254",
                        "198.18.0.1",
                        "224.0.0.251",
                        "255.255.255.255",
                        "::",
                        "::1",
                        "fe80::1",
                        "fd00::1",
                        "fd00:ec2::254",
                        "::ffff:169.254.169.254",
                        "64:ff9b::a9fe:a9fe",
                        "2002:7f00:1::",
                        "ff02::fb",
                        "203.0.113.200"}) {
    EXPECT_NE(c.refusalReason(ip::make_address(a)), "") << a;
  }
  for (const char* a : {"192.0.2.53", "198.51.100.10", "203.0.113.66", "8.8.8.8", "172.32.0.1",
                        "100.128.0.1", "2606:4700::1111", "64:ff9b::808:808"}) {
    EXPECT_EQ(c.refusalReason(ip::make_address(a)), "") << a;
  }
}

}  // namespace
}  // namespace vessel::gateway::policy
