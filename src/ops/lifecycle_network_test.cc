// A sandbox's egress settings and the tenant's credentials through the
// lifecycle, as the node stores and applies them.
#include "ops/testing/lifecycle_fixture.h"

namespace vessel::ops {
namespace {

using namespace std::chrono_literals;
using LifecycleTest = testing::LifecycleTest;

TEST_F(LifecycleTest, SetNetworkGoesToTheNodeForLiveSandboxesOnly) {
  std::string id = created();
  NetworkSpec spec;
  spec.mode = "allowlist";
  spec.allow = {"example.com"};
  ASSERT_TRUE(run(lc_->egress().setNetwork("t1", id, spec)).ok());
  EXPECT_EQ(node_->count("update-network " + id + " allowlist"), 1);
  spec.mode = "bogus";
  EXPECT_EQ(run(lc_->egress().setNetwork("t1", id, spec)).error().code(), Code::kInvalidArgument);
  spec.mode = "none";
  EXPECT_EQ(run(lc_->egress().setNetwork("t2", id, spec)).error().code(), Code::kNotFound);
  ASSERT_TRUE(lc_->remove("t1", id).ok());
  drain();
  EXPECT_EQ(run(lc_->egress().setNetwork("t1", id, spec)).error().code(), Code::kNotFound);
  EXPECT_EQ(node_->count("update-network"), 1);
}

TEST_F(LifecycleTest, NetworkSettingsAreReadAndAnsweredAsTheNodeStoresThem) {
  CreateRequest c;
  c.network = NetworkSpec{.mode = "allowlist", .allow = {"a.test"}};
  std::string id = created(c);
  auto now = lc_->egress().network("t1", id);
  ASSERT_TRUE(now.ok()) << now.error().message();
  EXPECT_EQ(now->allow, std::vector<std::string>{"a.test"});
  NetworkSpec none;  // empty mode: the node's default
  auto set = run(lc_->egress().setNetwork("t1", id, none));
  ASSERT_TRUE(set.ok()) << set.error().message();
  EXPECT_EQ(set->mode, "none");
  EXPECT_EQ(lc_->egress().network("t1", id)->mode, "none");
  EXPECT_EQ(lc_->egress().network("t2", id).error().code(), Code::kNotFound);
}

TEST_F(LifecycleTest, CredentialChangesReachTheNode) {
  CredentialSpec c{"gh", {"api.github.com"}, "Authorization", "Bearer 0123456789abcdef"};
  auto put = run(lc_->egress().putCredential("t1", c));
  ASSERT_TRUE(put.ok()) << put.error().message();
  EXPECT_EQ(put->hosts, std::vector<std::string>{"api.github.com"});
  EXPECT_EQ(put->created_ms, clock_.nowMs());
  EXPECT_EQ(node_->count("credential-changed t1 gh"), 1);
  c.value = "Bearer fedcba9876543210";  // a new value replaces the old one
  ASSERT_TRUE(run(lc_->egress().putCredential("t1", c)).ok());
  EXPECT_EQ(node_->count("credential-changed t1 gh"), 2);
  auto list = lc_->egress().listCredentials("t1");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().value, c.value);
  EXPECT_TRUE(lc_->egress().listCredentials("t2")->empty());
  // Another tenant's credential is absent; nothing reaches the node.
  EXPECT_EQ(run(lc_->egress().deleteCredential("t2", "gh")).error().code(), Code::kNotFound);
  EXPECT_EQ(node_->count("credential-changed"), 2);
  ASSERT_TRUE(run(lc_->egress().deleteCredential("t1", "gh")).ok());
  EXPECT_EQ(node_->count("credential-changed t1 gh"), 3);
  EXPECT_TRUE(lc_->egress().listCredentials("t1")->empty());
}

}  // namespace
}  // namespace vessel::ops
