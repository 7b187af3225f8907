// The installed tree runs. The CMake install rules put everything into a
// temporary prefix (as `make install` does), then vesseld starts from
// <prefix>/bin with the installed guest kernel and image, as the systemd
// units and the node image start it: jailed and with egress, so it must
// find vessel-gateway next to itself and the jail's preload library in
// <prefix>/lib/vessel (it refuses to start jailed without it), and a
// sandbox made from the installed image must run a command. One daemon;
// two guest boots (the minimal template's build, the create). And the
// installed vessel-templates script builds from the installed files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/child_process.h"
#include "base/fd.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::ScratchDir;
using testing::Vesseld;

ScratchDir* scratch = nullptr;
Vesseld* d = nullptr;
std::string prefix;

// cmake --install BUILD --prefix <scratch>/prefix, as `make install` does;
// "" or cmake's output when it failed.
std::string install() {
  scratch = new ScratchDir();
  prefix = scratch->path() + "/prefix";
  std::string log_path = scratch->path() + "/install.log";
  auto log = Fd::open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (!log.ok()) return log.error().message();
  SpawnOptions so;
  so.argv = {CMAKE_COMMAND, "--install", VESSEL_BUILD_DIR, "--prefix", prefix};
  so.fds = {{log->get(), 1}, {log->get(), 2}};
  auto p = ChildProcess::spawn(so);
  if (!p.ok()) return p.error().message();
  auto e = p->waitFor(240s);
  if (e.ok() && e->exited && e->code == 0) return "";
  std::ifstream f(log_path);
  return "cmake --install failed:\n" + std::string(std::istreambuf_iterator<char>(f), {});
}

class InstalledVesseldTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    install_error_ = install();
    if (!install_error_.empty()) return;
    fs::create_directories(scratch->path() + "/daemon");
    d = new Vesseld(testing::VesseldOptions{prefix + "/bin/vesseld",
                                            prefix + "/share/vessel/kernel/vmlinux",
                                            prefix + "/share/vessel/images/minimal.ext4",
                                            scratch->path() + "/daemon",
                                            {"--warm-pool", "none"}});
    started_ = d->start();
  }
  static void TearDownTestSuite() {
    testing::endSuite(d);
    delete scratch;
    scratch = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(install_error_, "");
    ASSERT_TRUE(started_) << "installed vesseld did not start:\n" << d->log();
  }
  static inline std::string install_error_;
  static inline bool started_ = false;
};

class InstalledTemplatesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { install_error_ = install(); }
  static void TearDownTestSuite() {
    delete scratch;
    scratch = nullptr;
  }
  void SetUp() override { ASSERT_EQ(install_error_, ""); }
  static inline std::string install_error_;
};

std::string exeOf(int64_t pid) {
  std::error_code ec;
  return fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).string();
}

TEST_F(InstalledVesseldTest, RunsTheInstalledGatewayJailedVmsAndImages) {
  auto h = d->call("GET", "/healthz", "", "");
  ASSERT_EQ(h.status, 200) << h.body;
  auto gw = h.js().at("gateway").as_object();
  ASSERT_TRUE(gw.at("running").as_bool()) << h.body;
  // The gateway vesseld runs is the installed one, next to it.
  EXPECT_EQ(exeOf(gw.at("pid").to_number<int64_t>()), prefix + "/bin/vessel-gateway");

  std::string why;
  std::string id = d->createSandbox(R"({"template":"minimal"})", &why);
  ASSERT_FALSE(id.empty()) << why << "\n" << d->log();
  EXPECT_EQ(d->sh(id, "uname -s"), "Linux\n");
  // Its QEMU runs jailed with the installed preload library (the restore
  // from the template's memory file needs it).
  auto qemus = d->qemuPids();
  ASSERT_FALSE(qemus.empty());
  std::ifstream env("/proc/" + std::to_string(qemus.front()) + "/environ");
  std::string environ(std::istreambuf_iterator<char>(env), {});
  EXPECT_NE(environ.find("LD_PRELOAD=" + prefix + "/lib/vessel/vessel-memfile-shim.so"),
            std::string::npos);
  EXPECT_TRUE(d->deleteSandbox(id));
}

// The installed vessel-templates (ExecStartPre= of the units, the node
// pod's init container) finds the installed CLI, kernel, images and specs.
// Against the build's template store, where `make build` already built the
// three templates from the same inputs: each is found, no guest boots.
TEST_F(InstalledTemplatesTest, ScriptUsesTheInstalledFiles) {
  const char* cache = std::getenv("VESSEL_CACHE_DIR");
  ASSERT_NE(cache, nullptr) << "run with build/<preset>/artifacts.env exported";
  std::string out_path = scratch->path() + "/templates.log";
  auto out = Fd::open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_TRUE(out.ok());
  SpawnOptions so;
  so.argv = {prefix + "/lib/vessel/vessel-templates"};
  // Only what the unit sets: nothing of the build's environment may help.
  so.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", std::string("VESSEL_CACHE_DIR=") + cache};
  so.fds = {{out->get(), 1}, {out->get(), 2}};
  auto p = ChildProcess::spawn(so);
  ASSERT_TRUE(p.ok()) << p.error().message();
  auto e = p->waitFor(300s);
  std::ifstream f(out_path);
  std::string log(std::istreambuf_iterator<char>(f), {});
  ASSERT_TRUE(e.ok() && e->exited && e->code == 0) << log;
  // Each found in the store (no build, no guest boot), in dependency order.
  EXPECT_NE(log.find("vessel-templates: minimal\n[  0%] hash inputs\n[100%] cached\n"
                     "vessel-templates: debian\n[  0%] hash inputs\n[100%] cached\n"
                     "vessel-templates: base\n[  0%] hash inputs\n[100%] cached\n"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace vessel
