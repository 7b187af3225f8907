// What the lifecycle admits and lists: quotas, disk sizes, the state
// disk's floor, and listings by creation with filters and stable pages.
#include "ops/testing/lifecycle_fixture.h"

namespace vessel::ops {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using LifecycleTest = testing::LifecycleTest;

TEST_F(LifecycleTest, QuotasRefuseWithWhatIsUsed) {
  Policy pol;
  pol.quota.max_sandboxes = 1;
  lc_->setPolicy(pol);
  created();
  CreateRequest c;
  c.tenant = "t1";
  auto r = lc_->create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kResourceExhausted);
  EXPECT_THAT(r.error().message(), HasSubstr("1 of at most 1"));
}

TEST_F(LifecycleTest, DiskSizeDefaultsToTheTemplatesAndIsBounded) {
  Policy pol;
  pol.max_disk_mib = 4096;
  lc_->setPolicy(pol);
  // No size asked: the template's default (kDefaultDiskMib here).
  std::string dflt = created();
  EXPECT_EQ((*store_->getSandbox("t1", dflt))->disk_mib, templates::kDefaultDiskMib);
  CreateRequest c;
  c.disk_mib = 512;
  std::string sized = created(c);
  EXPECT_EQ((*store_->getSandbox("t1", sized))->disk_mib, 512u);
  // Above the deployment's maximum, or below the template image: refused.
  c.tenant = "t1";
  c.disk_mib = 8192;
  auto big = lc_->create(c);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(big.error().message(), HasSubstr("and 4096 here"));
  {
    // A 96 MiB image (sparse): no disk may be smaller.
    installTemplate("big", 96 << 20);
    auto t = templates_->open("big");
    ASSERT_TRUE(t.ok()) << t.error().message();
    EXPECT_EQ((*t)->baseDiskMib(), 96u);
  }
  c.template_name = "big";
  c.disk_mib = 64;
  auto small = lc_->create(c);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(small.error().message(), HasSubstr("between 96 (template 'big')"));
}

TEST_F(LifecycleTest, DiskAndVcpuQuotasCountSandboxesPauseSnapshotsAndTemplates) {
  Policy pol;
  pol.quota.max_disk_mib = 3000;
  lc_->setPolicy(pol);
  CreateRequest c;
  c.disk_mib = 1024;
  std::string a = created(c);
  // Paused: its disk and its saved memory (256 MiB) count.
  ASSERT_TRUE(lc_->pause("t1", a).ok());
  drain();
  ASSERT_EQ(state(a), "paused");
  EXPECT_EQ(store_->tenantUsage("t1")->disk_mib, 1024 + 256);
  created(c);  // 2304 MiB now
  c.tenant = "t1";
  c.disk_mib = 1000;
  auto over = lc_->create(c);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code(), Code::kResourceExhausted);
  EXPECT_THAT(over.error().message(), HasSubstr("take 2304 MiB of at most 3000 MiB"));
  // The tenant's templates take the node's disk too: 100 MiB of one makes
  // a 650 MiB disk, which fits without it, not fit.
  c.disk_mib = 650;
  {
    std::string stored = templates::tenantTemplateName("t1", "mine");
    installTemplate(stored);
    auto t = templates_->open(stored);
    ASSERT_TRUE(t.ok());
    std::ofstream(t->get()->path(templates::kMemoryFile)) << std::string(100 << 20, 'm');
  }
  uint64_t tmpl_mib = templates_->allocatedMib(templates::tenantTemplateName("t1", ""));
  EXPECT_GE(tmpl_mib, 100u);
  auto tmpl = lc_->create(c);
  ASSERT_FALSE(tmpl.ok());
  EXPECT_THAT(tmpl.error().message(), HasSubstr("take " + std::to_string(2304 + tmpl_mib)));
  // Another tenant is not charged for them.
  c.tenant = "t2";
  EXPECT_TRUE(lc_->create(c).ok());
  drain();

  // vCPUs of running sandboxes: one each here.
  Policy cpu;
  cpu.quota.max_vcpus = 1;
  lc_->setPolicy(cpu);
  c.tenant = "t1";
  auto no_cpu = lc_->create(c);
  ASSERT_FALSE(no_cpu.ok());
  EXPECT_THAT(no_cpu.error().message(), HasSubstr("1 of at most 1 vCPUs"));
}

TEST_F(LifecycleTest, ALowStateDiskRefusesCreatesPausesAndForks) {
  std::string id = created();
  Policy pol;
  pol.state_dir = dir_;
  pol.min_free_disk_mib = uint64_t{1} << 40;  // more than any disk here has
  lc_->setPolicy(pol);
  CreateRequest c;
  c.tenant = "t1";
  auto refused = [&](const Result<Accepted>& r) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Code::kResourceExhausted);
    EXPECT_THAT(r.error().message(), HasSubstr("refused: the state disk is nearly full (" + dir_));
  };
  refused(lc_->create(c));
  refused(lc_->pause("t1", id));
  refused(lc_->fork("t1", id, 1));
  EXPECT_EQ(state(id), "running");
  pol.min_free_disk_mib = 1;
  lc_->setPolicy(pol);
  EXPECT_TRUE(lc_->pause("t1", id).ok());
}

TEST_F(LifecycleTest, ListsByCreationWithFiltersAndStablePages) {
  installTemplate("other");
  std::vector<std::string> ids;  // oldest first
  for (int i = 0; i < 5; ++i) {
    CreateRequest c;
    c.metadata = {{"k", i % 2 ? "odd" : "even"}};
    if (i == 4) c.template_name = "other";
    ids.push_back(created(c));
    clock_.advance(1s);
  }
  int64_t third = lc_->get("t1", ids[2])->created_ms;
  ASSERT_TRUE(lc_->pause("t1", ids[1]).ok());
  drain();
  auto page = [&](ListRequest r) {
    r.tenant = "t1";
    if (r.order == ListRequest::Order::kById) r.order = ListRequest::Order::kNewestFirst;
    std::vector<std::string> got;
    auto p = lc_->list(r);
    EXPECT_TRUE(p.ok()) << p.error().message();
    if (p.ok())
      for (auto& s : p->sandboxes) got.push_back(s.id);
    return std::pair{got, p.ok() ? p->next_page_token : "?"};
  };
  ListRequest all;
  all.page_size = 2;
  auto [p1, t1] = page(all);
  EXPECT_EQ(p1, (std::vector<std::string>{ids[4], ids[3]}));
  // A sandbox created between pages sorts before them and shifts nothing.
  std::string later = created();
  all.page_token = t1;
  auto [p2, t2] = page(all);
  EXPECT_EQ(p2, (std::vector<std::string>{ids[2], ids[1]}));
  all.page_token = t2;
  auto [p3, t3] = page(all);
  EXPECT_EQ(p3, (std::vector<std::string>{ids[0]}));
  EXPECT_EQ(t3, "");
  ListRequest f;
  f.page_size = 10;
  f.metadata = {{"k", "even"}};
  f.created_after_ms = third;
  EXPECT_EQ(page(f).first, (std::vector<std::string>{ids[4], ids[2]}));
  f.template_name = "other";
  EXPECT_EQ(page(f).first, (std::vector<std::string>{ids[4]}));
  ListRequest st;
  st.states = {SandboxState::kPaused};
  EXPECT_EQ(page(st).first, (std::vector<std::string>{ids[1]}));
  st.states = {SandboxState::kPaused, SandboxState::kRunning};
  EXPECT_EQ(page(st).first.size(), 6u);
  EXPECT_EQ(page(st).first.front(), later);
  // Oldest first, paged the same way; the one made meanwhile comes last.
  ListRequest asc;
  asc.order = ListRequest::Order::kOldestFirst;
  asc.page_size = 4;
  auto [a1, at1] = page(asc);
  EXPECT_EQ(a1, (std::vector<std::string>{ids[0], ids[1], ids[2], ids[3]}));
  asc.page_token = at1;
  EXPECT_EQ(page(asc).first, (std::vector<std::string>{ids[4], later}));
  ListRequest bad;
  bad.tenant = "t1";
  bad.order = ListRequest::Order::kNewestFirst;
  bad.page_token = "sb-nosuchthing";
  EXPECT_EQ(lc_->list(bad).error().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace vessel::ops
