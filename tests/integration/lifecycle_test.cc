// Templates and the fast lifecycle with real guests: a template is built
// once per binary, and sandboxes are restored from it, paused, resumed and
// forked. Every test ends with no QEMU process of its own left.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>

#include "base/run_blocking.h"
#include "base/sha256.h"
#include "guest_env.h"
#include "hypervisor/qemu/qemu.h"
#include "node/runtime.h"
#include "node/template_builder.h"

namespace vessel {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::ScratchDir;

struct Shared {
  ScratchDir dir;
  asio::io_context io;
  hypervisor::qemu::QemuHypervisor hv{{}};
  std::string qemu_version, kernel_sha;
  std::unique_ptr<templates::TemplateStore> store;
  std::shared_ptr<const templates::Template> tmpl;
  std::map<std::string, std::string> sha;  // template file -> sha256 at build
};
Shared* g = nullptr;

class LifecycleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g = new Shared;
    g->qemu_version = *hypervisor::qemu::qemuVersion("qemu-system-x86_64");
    g->kernel_sha = *sha256File(testing::kernelPath());
    g->store = std::make_unique<templates::TemplateStore>(g->dir.path() + "/templates",
                                                          g->qemu_version, g->kernel_sha);
    fs::create_directories(g->dir.path() + "/templates");
    fs::create_directories(g->dir.path() + "/work");
    templates::BuildSpec spec;
    spec.name = "lc";
    spec.files["/etc/vessel-template"] = "built\n";
    spec.commands = {"echo from-build-command > /home/user/build.txt"};
    spec.start = "sleep 100000";
    spec.ready = "test -f /home/user/build.txt";
    node::BuildInputs in{testing::minimalImage(), testing::kernelPath(),   g->kernel_sha,
                         g->qemu_version,         hypervisor::Accel::kTcg, g->dir.path() + "/work"};
    auto t = runBlocking(g->io, node::buildTemplate(g->hv, *g->store, spec, in));
    ASSERT_TRUE(t.ok()) << t.error().message();
    g->tmpl = *t;
    for (const auto& [f, s] : g->tmpl->manifest.files) g->sha[f] = s;
  }
  static void TearDownTestSuite() {
    delete g;
    g = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(g && g->tmpl) << "template build failed";
    node::RuntimeOptions o;
    o.root = dir_.path();
    o.kernel = testing::kernelPath();
    o.pool_size = 0;
    rt_ = std::make_unique<node::Runtime>(g->io, g->hv, *g->store, o);
  }
  void TearDown() override {
    for (auto& sb : live_) (void)runBlocking(g->io, rt_->destroy(*sb));
    runBlocking(g->io, [this]() -> asio::awaitable<int> {
      co_await rt_->drainPools();
      co_return 0;
    }());
    EXPECT_THAT(testing::qemuProcessesUsing(dir_.path()), ::testing::IsEmpty());
    EXPECT_TRUE(fs::is_empty(dir_.path() + "/vms")) << "vm dirs left behind";
  }
  std::shared_ptr<node::Sandbox> create(node::CreateOptions o = {}) {
    auto sb = runBlocking(g->io, rt_->create("lc", o));
    EXPECT_TRUE(sb.ok()) << sb.error().message();
    if (!sb.ok()) return nullptr;
    live_.push_back(*sb);
    return *sb;
  }
  std::string sh(node::Sandbox& sb, const std::string& cmd, const std::string& user = "") {
    agentclient::ExecSpec e;
    e.shell = cmd;
    e.user = user;
    auto r = runBlocking(g->io, sb.agent()->run(e));
    EXPECT_TRUE(r.ok()) << cmd << ": " << r.error().message();
    if (!r.ok()) return "<error>";
    EXPECT_TRUE(r->exit.exited && r->exit.code == 0) << cmd << ": " << r->err;
    return r->out;
  }

  ScratchDir dir_;
  std::unique_ptr<node::Runtime> rt_;
  std::vector<std::shared_ptr<node::Sandbox>> live_;
};

TEST_F(LifecycleTest, ClonesAreIndependentAndTheTemplateIsUntouched) {
  auto a = create(), b = create();
  ASSERT_TRUE(a && b);
  // The build's file, command output and warm process are in every clone.
  EXPECT_EQ(sh(*a, "cat /etc/vessel-template"), "built\n");
  EXPECT_EQ(sh(*b, "cat /home/user/build.txt"), "from-build-command\n");
  EXPECT_THAT(sh(*a, "ps"), HasSubstr("sleep 100000"));
  sh(*a, "echo only-a > /home/user/mine && sync");
  EXPECT_EQ(sh(*b, "cat /home/user/mine 2>/dev/null || echo absent"), "absent\n");
  EXPECT_EQ(sh(*a, "cat /home/user/mine"), "only-a\n");
  for (const auto& [f, s] : g->sha)
    EXPECT_EQ(*sha256File(g->tmpl->path(f.c_str())), s) << f << " changed";
}

TEST_F(LifecycleTest, IdentityDiffersBetweenClonesAndTheClockIsRight) {
  auto a = create(), b = create();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(sh(*a, "hostname"), a->id() + "\n");
  EXPECT_EQ(sh(*b, "hostname"), b->id() + "\n");
  EXPECT_EQ(sh(*a, "echo $VESSEL_SANDBOX_ID"), a->id() + "\n");
  std::string ra = sh(*a, "head -c 32 /dev/urandom | od -An -tx1");
  std::string rb = sh(*b, "head -c 32 /dev/urandom | od -An -tx1");
  EXPECT_NE(ra, rb) << "two clones share /dev/urandom output";
  long guest = std::stol(sh(*a, "date +%s"));
  long host = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  EXPECT_LT(std::labs(guest - host), 10) << "guest clock " << guest << " host " << host;
}

TEST_F(LifecycleTest, PauseAndResumeKeepAProcessAndAFile) {
  auto a = create();
  ASSERT_TRUE(a);
  sh(*a, "echo kept > /home/user/kept.txt");
  agentclient::ExecSpec e;
  e.shell = "i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.1; done";
  auto p = runBlocking(g->io, a->agent()->exec(e));
  ASSERT_TRUE(p.ok()) << p.error().message();
  uint32_t pid = (*p)->pid();
  (*p)->detach();
  std::string id = a->id();
  ASSERT_TRUE(runBlocking(g->io, rt_->pause(*a)).ok());
  EXPECT_EQ(a->state(), node::Sandbox::State::kPaused);
  EXPECT_EQ(a->vm(), nullptr);
  EXPECT_THAT(testing::qemuProcessesFor(fs::path(a->vmDir()).filename().string()),
              ::testing::IsEmpty());
  live_.clear();
  // A new Runtime, as after a vesseld restart, resumes it from its files.
  node::RuntimeOptions o;
  o.root = dir_.path();
  o.kernel = testing::kernelPath();
  o.pool_size = 0;
  rt_ = std::make_unique<node::Runtime>(g->io, g->hv, *g->store, o);
  auto r = runBlocking(g->io, rt_->resume(id));
  ASSERT_TRUE(r.ok()) << r.error().message();
  live_.push_back(*r);
  EXPECT_EQ(sh(**r, "cat /home/user/kept.txt"), "kept\n");
  auto procs = runBlocking(g->io, (*r)->agent()->listProcesses());
  ASSERT_TRUE(procs.ok());
  bool found = false;
  for (auto& pi : *procs) found |= pi.pid == pid && pi.running;
  EXPECT_TRUE(found) << "process " << pid << " did not survive pause/resume";
  std::string c1 = sh(**r, "cat /tmp/counter");
  std::string c2 = sh(**r, "sleep 0.5; cat /tmp/counter");
  EXPECT_NE(c1, c2) << "the process is not running after resume";
}

TEST_F(LifecycleTest, ForkGivesIndependentCopiesAndTheOriginalCarriesOn) {
  auto a = create();
  ASSERT_TRUE(a);
  sh(*a, "echo before-fork > /home/user/f.txt; sync");
  auto kids = runBlocking(g->io, rt_->fork(*a, 2));
  ASSERT_TRUE(kids.ok()) << kids.error().message();
  for (auto& k : *kids) live_.push_back(k);
  auto& k1 = *(*kids)[0];
  auto& k2 = *(*kids)[1];
  EXPECT_EQ(sh(k1, "cat /home/user/f.txt"), "before-fork\n");
  EXPECT_EQ(sh(k2, "cat /home/user/f.txt"), "before-fork\n");
  sh(k1, "echo k1 > /home/user/f.txt");
  sh(*a, "echo parent > /home/user/f.txt");
  EXPECT_EQ(sh(k2, "cat /home/user/f.txt"), "before-fork\n");
  EXPECT_EQ(sh(k1, "cat /home/user/f.txt"), "k1\n");
  EXPECT_EQ(sh(*a, "cat /home/user/f.txt"), "parent\n");
  EXPECT_NE(sh(k1, "hostname"), sh(k2, "hostname"));
}

TEST_F(LifecycleTest, EightConcurrentCreates) {
  rt_->setPoolSize(0);
  std::vector<std::optional<Result<std::shared_ptr<node::Sandbox>>>> res(8);
  for (int i = 0; i < 8; ++i)
    asio::co_spawn(
        g->io,
        [this, i, &res]() -> asio::awaitable<void> {
          // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
          node::CreateOptions o;
          res[i] = co_await rt_->create("lc", std::move(o));
        },
        asio::detached);
  auto done = [&] {
    for (auto& r : res)
      if (!r) return false;
    return true;
  };
  g->io.restart();
  while (!done()) g->io.run_one_for(20ms);
  g->io.restart();
  std::set<std::string> ids;
  for (auto& r : res) {
    ASSERT_TRUE(r->ok()) << r->error().message();
    live_.push_back(**r);
    ids.insert((**r)->id());
  }
  EXPECT_EQ(ids.size(), 8u);
  for (auto& sb : live_) EXPECT_EQ(sh(*sb, "echo ok"), "ok\n");
}

TEST_F(LifecycleTest, PoolIsUsedAndRefilled) {
  rt_->setPoolSize(2);
  ASSERT_TRUE(runBlocking(g->io, rt_->fillPool("lc")).ok());
  EXPECT_EQ(rt_->pooled(g->tmpl->id()), 2u);
  auto a = create();
  ASSERT_TRUE(a);
  EXPECT_EQ(sh(*a, "echo pooled"), "pooled\n");
  // Refill runs in the background: wait (bounded) until the pool is full.
  for (int i = 0; i < 300 && rt_->pooled(g->tmpl->id()) < 2; ++i) g->io.run_one_for(50ms);
  g->io.restart();
  EXPECT_EQ(rt_->pooled(g->tmpl->id()), 2u);
}

// Issue 16: misses grow a budgeted pool, which refills to its new size;
// pooled VMs wait at a lower CPU priority and a claimed one gets the
// normal one back.
TEST_F(LifecycleTest, MissesGrowThePoolAndPooledVmsYieldTheCpu) {
  rt_->setPoolSize(1);
  rt_->setPoolBudget("lc", 4096);
  ASSERT_TRUE(runBlocking(g->io, rt_->fillPool("lc")).ok());
  auto pids = rt_->pooledPids(g->tmpl->id());
  ASSERT_EQ(pids.size(), 1u);
  bool root = ::geteuid() == 0;
  errno = 0;
  if (root) EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(pids[0])), 10);
  std::vector<std::optional<Result<std::shared_ptr<node::Sandbox>>>> res(3);
  for (int i = 0; i < 3; ++i)
    asio::co_spawn(
        g->io,
        [this, i, &res]() -> asio::awaitable<void> {
          node::CreateOptions o;
          res[i] = co_await rt_->create("lc", std::move(o));
        },
        asio::detached);
  auto done = [&] {
    for (auto& r : res)
      if (!r) return false;
    return true;
  };
  g->io.restart();
  while (!done()) g->io.run_one_for(20ms);
  for (auto& r : res) {
    ASSERT_TRUE(r->ok()) << r->error().message();
    live_.push_back(**r);
    if (root && (**r)->vm()->pid() == pids[0])
      EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(pids[0])), 0) << "claimed VM";
  }
  auto st = rt_->poolStats("lc");
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.misses, 2u);
  EXPECT_EQ(st.target, 3u);  // the floor (1) and one per miss
  // It refills to the new size in the background: wait (bounded) for it.
  for (int i = 0; i < 1200 && rt_->pooled(g->tmpl->id()) < 3; ++i) g->io.run_one_for(50ms);
  g->io.restart();
  EXPECT_EQ(rt_->pooled(g->tmpl->id()), 3u);
  EXPECT_GT(rt_->poolStats("lc").vm_cost_mib, 0u) << "a pooled VM's memory was not measured";
  for (auto& sb : live_) EXPECT_EQ(sh(*sb, "echo ok"), "ok\n");
}

TEST_F(LifecycleTest, ForkIntoANewTemplate) {
  auto a = create();
  ASSERT_TRUE(a);
  sh(*a, "echo from-parent > /home/user/forked.txt && sync");
  agentclient::ExecSpec e;
  e.shell = "sleep 100000";
  auto p = runBlocking(g->io, a->agent()->exec(e));
  ASSERT_TRUE(p.ok()) << p.error().message();
  (*p)->detach();
  auto t = runBlocking(g->io, rt_->forkToTemplate(*a, "lc-fork"));
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ((*t)->manifest.name, "lc-fork");
  EXPECT_EQ((*t)->manifest.memory_mib, g->tmpl->manifest.memory_mib);
  // The original carries on.
  EXPECT_EQ(sh(*a, "echo still-here"), "still-here\n");
  // A create from the new template starts where the parent was, with an
  // identity of its own; its changes do not reach the parent.
  auto c = runBlocking(g->io, rt_->create("lc-fork", node::CreateOptions{}));
  ASSERT_TRUE(c.ok()) << c.error().message();
  live_.push_back(*c);
  EXPECT_EQ(sh(**c, "cat /home/user/forked.txt"), "from-parent\n");
  EXPECT_THAT(sh(**c, "ps"), HasSubstr("sleep 100000"));
  EXPECT_EQ(sh(**c, "hostname"), (*c)->id() + "\n");
  sh(**c, "echo child > /home/user/forked.txt && sync");
  EXPECT_EQ(sh(*a, "cat /home/user/forked.txt"), "from-parent\n");
  // The template is verified like any other, and in use while `c` runs.
  EXPECT_TRUE(g->store->inUse((*t)->id()));
  EXPECT_TRUE(g->store->open("lc-fork", (*t)->manifest.version).ok());
}

// The default pool holds VMs restored ahead of time (PoolMode::kWarm): the
// identity a create gives must still be each sandbox's own, and a pooled VM
// that died while it waited must be replaced, not handed out.
TEST_F(LifecycleTest, WarmPoolGivesFreshIdentityAndSkipsADeadVm) {
  rt_->setPoolMode(node::RuntimeOptions::PoolMode::kWarm);
  rt_->setPoolSize(3);
  ASSERT_TRUE(runBlocking(g->io, rt_->fillPool("lc")).ok());
  auto pids = rt_->pooledPids(g->tmpl->id());
  ASSERT_EQ(pids.size(), 3u);
  rt_->setPoolSize(0);  // no refill: the next creates take exactly these VMs
  ASSERT_EQ(::kill(pids[0], SIGKILL), 0);
  auto a = create(), b = create();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(rt_->pooled(g->tmpl->id()), 0u) << "the dead VM was not taken out of the pool";
  EXPECT_NE(a->vm()->pid(), pids[0]);
  EXPECT_NE(b->vm()->pid(), pids[0]);
  EXPECT_EQ(sh(*a, "hostname"), a->id() + "\n");
  EXPECT_EQ(sh(*b, "echo $VESSEL_SANDBOX_ID"), b->id() + "\n");
  std::string ra = sh(*a, "head -c 32 /dev/urandom | od -An -tx1");
  std::string rb = sh(*b, "head -c 32 /dev/urandom | od -An -tx1");
  EXPECT_NE(ra, rb) << "two warm clones share /dev/urandom output";
  long guest = std::stol(sh(*b, "date +%s"));
  long host = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  EXPECT_LT(std::labs(guest - host), 10) << "guest clock " << guest << " host " << host;
}

TEST_F(LifecycleTest, CorruptMemoryFileAndMismatchedManifestAreRefused) {
  // A copy of the template in a second store, corrupted there.
  std::string root2 = dir_.path() + "/store2";
  fs::create_directories(root2 + "/lc");
  fs::copy(g->tmpl->dir, root2 + "/lc/" + g->tmpl->manifest.version, fs::copy_options::recursive);
  {
    std::fstream f(root2 + "/lc/" + g->tmpl->manifest.version + "/memory",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);
    f.put('\x5a');
  }
  templates::TemplateStore store2(root2, g->qemu_version, g->kernel_sha);
  node::RuntimeOptions o;
  o.root = dir_.path() + "/rt2";
  o.kernel = testing::kernelPath();
  o.pool_size = 0;
  node::Runtime rt2(g->io, g->hv, store2, o);
  node::CreateOptions none;
  auto bad = runBlocking(g->io, rt2.create("lc", none));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Code::kFailedPrecondition);
  EXPECT_THAT(bad.error().message(), HasSubstr("corrupt"));
  // The same template on a host with another QEMU.
  templates::TemplateStore other(g->store->root(), "QEMU emulator version 99", g->kernel_sha);
  node::Runtime rt3(g->io, g->hv, other, o);
  auto mismatch = runBlocking(g->io, rt3.create("lc", none));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_THAT(mismatch.error().message(), HasSubstr("rebuild the template"));
  EXPECT_TRUE(fs::is_empty(o.root + "/vms"));
}

}  // namespace
}  // namespace vessel
