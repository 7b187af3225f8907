// The node's egress settings without a gateway (vesseld --no-egress) and
// the wildcard rule; registration with a real gateway is tested in
// tests/integration/egress.
#include "vesseld/egress_policies.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>

#include "base/run_blocking.h"

namespace vessel::vesseld {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

ops::NetworkSpec spec(std::string mode, std::vector<std::string> allow = {},
                      std::vector<std::string> inspect = {}) {
  ops::NetworkSpec s;
  s.mode = std::move(mode);
  s.allow = std::move(allow);
  s.inspect = std::move(inspect);
  return s;
}

TEST(EgressPoliciesTest, WildcardsOnPublicSuffixesAreRefused) {
  for (const auto& bad :
       {spec("allowlist", {"*.co.uk"}), spec("allowlist", {"*.s3.amazonaws.com:443"}),
        spec("full", {}, {"*.github.io"})}) {
    auto c = checkWildcards(bad);
    ASSERT_FALSE(c.ok());
    EXPECT_THAT(c.error().message(), HasSubstr("public suffix"));
  }
  EXPECT_TRUE(checkWildcards(spec("allowlist", {"*.bbc.co.uk", "pypi.org", "*.a.test:8443"})).ok());
  EXPECT_TRUE(checkWildcards(spec("full", {}, {"*.octocat.github.io"})).ok());
}

TEST(EgressPoliciesTest, WithoutEgressOnlyNoneIsStoredAndReadBack) {
  std::string dir = ::testing::TempDir() + "/egress-policies-" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto store = store::openSqlite(dir + "/vessel.db");
  ASSERT_TRUE(store.ok()) << store.error().message();
  ASSERT_TRUE((*store)->createTenant("t1", "one").ok());
  EgressPolicies p(**store, nullptr, "full");
  EXPECT_EQ(p.defaults().mode, "none");  // no gateway: the operator's default cannot hold
  EXPECT_EQ(p.prepare("t1", "sb-1", spec("full")).error().code(), Code::kFailedPrecondition);
  auto g = p.prepare("t1", "sb-1", spec(""));
  ASSERT_TRUE(g.ok()) << g.error().message();
  EXPECT_FALSE(g->route);
  auto s = p.stored("sb-1");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->mode, "none");
  EXPECT_EQ(p.stored("sb-never").value().mode, "none");  // from before egress
  ASSERT_TRUE(p.inherit("sb-1", "sb-2").ok());
  EXPECT_EQ(p.stored("sb-2").value().mode, "none");
  boost::asio::io_context io;
  auto now = runBlocking(io, p.update("t1", "sb-1", spec(""), false));
  ASSERT_TRUE(now.ok()) << now.error().message();
  EXPECT_EQ(now->mode, "none");
  EXPECT_EQ(
      runBlocking(io, p.update("t1", "sb-1", spec("allowlist", {"a.test"}), false)).error().code(),
      Code::kFailedPrecondition);
  // No gateway, nothing to do.
  runBlocking(io, [&]() -> boost::asio::awaitable<bool> {
    co_await p.credentialChanged("t1", "nothing-attached");
    co_await p.detach("sb-1");
    co_return true;
  }());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vessel::vesseld
