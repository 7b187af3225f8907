// Template builds as operations: progress, the template, failures in the
// tenant's names, refusals, and builds in flight at shutdown.
#include "base/base64.h"
#include "ops/testing/lifecycle_fixture.h"

namespace vessel::ops {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;
using LifecycleTest = testing::LifecycleTest;

TEST_F(LifecycleTest, ABuildReportsProgressThenTheTemplateAsAnOperation) {
  templates::BuildSpec spec;
  spec.name = "py";
  auto op = lc_->buildTemplate("t1", spec);
  ASSERT_TRUE(op.ok()) << op.error().message();
  EXPECT_EQ(op->kind, "build");
  std::string stored = templates::tenantTemplateName("t1", "py");
  EXPECT_EQ(node_->count("build " + stored + " from minimal"), 1);
  drain();
  EXPECT_EQ(this->op(op->id).state, OpState::kDone);
  std::vector<std::string> types;
  auto ev = store_->listEvents("t1", "", 0, 1000);
  ASSERT_TRUE(ev.ok());
  for (auto& e : *ev)
    if (e.operation_id == op->id) types.push_back(e.type + ":" + e.data_json);
  // Progress, then the template, then the operation's end; in the tenant's
  // names (the stored one never shows).
  auto at = [&](const std::string& type) {
    for (size_t i = 0; i < types.size(); ++i)
      if (types[i].rfind(type + ":", 0) == 0) return static_cast<int>(i);
    return -1;
  };
  ASSERT_GE(at("template.progress"), 0);
  EXPECT_THAT(types[at("template.progress")], HasSubstr(R"("template":"py")"));
  ASSERT_GT(at("template.built"), at("template.progress"));
  EXPECT_THAT(types[at("template.built")], HasSubstr(R"("name":"py")"));
  EXPECT_GT(at("operation.done"), at("template.built"));
  for (const auto& t : types) EXPECT_THAT(t, Not(HasSubstr(stored))) << t;
}

TEST_F(LifecycleTest, AFailedBuildFailsItsOperationInTheTenantsNames) {
  std::string stored = templates::tenantTemplateName("t1", "py");
  node_->fail_build.insert(stored);
  templates::BuildSpec spec;
  spec.name = "py";
  auto op = lc_->buildTemplate("t1", spec);
  ASSERT_TRUE(op.ok()) << op.error().message();
  drain();
  auto done = this->op(op->id);
  EXPECT_EQ(done.state, OpState::kFailed);
  EXPECT_THAT(done.error_message, HasSubstr("build py: the ready check never passed"));
  EXPECT_THAT(done.error_message, Not(HasSubstr(stored)));
}

TEST_F(LifecycleTest, BuildsAreRefusedBeforeOrWhenTheNodeCannotTakeThem) {
  templates::BuildSpec spec;
  spec.name = "minimal";  // built in
  EXPECT_EQ(lc_->buildTemplate("t1", spec).error().code(), Code::kAlreadyExists);
  spec.name = "py";
  spec.base = "nosuch";
  EXPECT_EQ(lc_->buildTemplate("t1", spec).error().code(), Code::kNotFound);
  EXPECT_EQ(node_->count("build"), 0);
  spec.base = "minimal";
  node_->builds_full = true;
  EXPECT_EQ(lc_->buildTemplate("t1", spec).error().code(), Code::kResourceExhausted);
  auto ops = store_->listUnfinishedOperations();
  ASSERT_TRUE(ops.ok());
  EXPECT_TRUE(ops->empty());  // the refused build's operation failed at once
}

TEST_F(LifecycleTest, BuildsInFlightFailAtShutdown) {
  templates::BuildSpec spec;
  spec.name = "py";
  auto op = lc_->buildTemplate("t1", spec);
  ASSERT_TRUE(op.ok());
  asio::co_spawn(io_, lc_->shutdown(), asio::detached);
  drain();
  auto o = this->op(op->id);
  EXPECT_EQ(o.state, OpState::kFailed);
  EXPECT_THAT(o.error_message, HasSubstr("stopped during the build"));
}

// A from_image build's registry credential: resolved from the building
// tenant's own credentials, only when meant for the image's registry.
TEST_F(LifecycleTest, ARegistryCredentialIsTheTenantsAndMeantForTheRegistry) {
  auto put = [&](const std::string& tenant, const std::string& name, const std::string& host,
                 const std::string& value) {
    store::CredentialRecord c;
    c.tenant_id = tenant;
    c.name = name;
    c.hosts = {host};
    c.header = "Authorization";
    c.value = value;
    ASSERT_TRUE(store_->putCredential(c).ok());
  };
  put("t1", "reg", "registry.lan", "Basic " + base64Encode("alice:pass-word"));
  put("t1", "bearer", "registry.lan", "Bearer abcdefghijklmnopqrstuvwxyz");
  put("t2", "other", "registry.lan", "Basic " + base64Encode("bob:his-password"));
  templates::BuildSpec spec;
  spec.name = "app";
  spec.from_image = "registry.lan:5000/team/app:1";
  spec.from_image_credential = "reg";
  ASSERT_TRUE(lc_->buildTemplate("t1", spec).ok());
  EXPECT_EQ(node_->last_build_auth.username, "alice");
  EXPECT_EQ(node_->last_build_auth.password, "pass-word");
  drain();

  node_->last_build_auth = {};
  spec.from_image_credential = "other";  // t2's: t1 cannot name it
  EXPECT_EQ(lc_->buildTemplate("t1", spec).error().code(), Code::kNotFound);
  spec.from_image_credential = "bearer";
  auto bearer = lc_->buildTemplate("t1", spec);
  ASSERT_FALSE(bearer.ok());
  EXPECT_THAT(bearer.error().message(), HasSubstr("Basic"));
  EXPECT_THAT(bearer.error().message(), Not(HasSubstr("abcdefghij")));
  spec.from_image = "ghcr.io/team/app:1";  // another registry
  spec.from_image_credential = "reg";
  auto elsewhere = lc_->buildTemplate("t1", spec);
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_THAT(elsewhere.error().message(),
              HasSubstr("is for registry.lan, not the image's registry ghcr.io"));
  EXPECT_TRUE(node_->last_build_auth.empty()) << "a refused credential reached the node";
  EXPECT_EQ(node_->count("build " + templates::tenantTemplateName("t1", "app") + " from "), 1);

  // A username and password given with the request (E2B's
  // fromImageRegistry) reach the node as a stored credential's do; never
  // beside a named credential, nor without an image.
  spec.from_image_credential = "reg";
  EXPECT_EQ(lc_->buildTemplate("t1", spec, {"carol", "given"}).error().code(),
            Code::kInvalidArgument);
  spec.from_image_credential.clear();
  ASSERT_TRUE(lc_->buildTemplate("t1", spec, {"carol", "given"}).ok());
  EXPECT_EQ(node_->last_build_auth.username, "carol");
  EXPECT_EQ(node_->last_build_auth.password, "given");
  drain();
  node_->last_build_auth = {};
  templates::BuildSpec plain;
  plain.name = "plain";
  EXPECT_EQ(lc_->buildTemplate("t1", plain, {"carol", "given"}).error().code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(node_->last_build_auth.empty());
}

// A build is a sandbox while it runs: its VM counts in the tenant's
// quotas, against other builds and creates, until it ends.
TEST_F(LifecycleTest, ABuildCountsInTheTenantsQuotasWhileItRuns) {
  Policy pol;
  pol.quota.max_memory_mib = 600;
  lc_->setPolicy(pol);
  templates::BuildSpec spec;
  spec.name = "one";
  spec.memory_mib = 512;
  auto first = lc_->buildTemplate("t1", spec);
  ASSERT_TRUE(first.ok()) << first.error().message();
  spec.name = "two";
  auto second = lc_->buildTemplate("t1", spec);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code(), Code::kResourceExhausted);
  EXPECT_THAT(second.error().message(), HasSubstr("512 MiB of at most 600"));
  EXPECT_THAT(second.error().message(), HasSubstr("build two"));
  CreateRequest c;
  c.tenant = "t1";
  auto create = lc_->create(c);  // minimal: 256 MiB more than fits
  ASSERT_FALSE(create.ok());
  EXPECT_EQ(create.error().code(), Code::kResourceExhausted);
  // Another tenant's builds are not this one's.
  spec.name = "theirs";
  ASSERT_TRUE(lc_->buildTemplate("t2", spec).ok());
  drain();  // the builds end: their VMs no longer count
  EXPECT_EQ(this->op(first->id).state, OpState::kDone);
  EXPECT_TRUE(lc_->buildTemplate("t1", spec).ok());
  drain();
  EXPECT_TRUE(lc_->create(c).ok());
}

}  // namespace
}  // namespace vessel::ops
