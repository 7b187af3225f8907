// The installed tree runs. The CMake install rules put everything into a
// temporary prefix (as `make install` does), then vesseld starts from
// <prefix>/bin with the installed guest kernel and image, as the systemd
// units and the node image start it: jailed and with egress, so it must
// find vessel-gateway next to itself and the jail's preload library in
// <prefix>/lib/vessel (it refuses to start jailed without it), and a
// sandbox made from the installed image must run a command. One daemon;
// two guest boots (the minimal template's build, the create).
#include <gtest/gtest.h>

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
std::string install_log;
bool started = false;

class InstalledVesseldTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch = new ScratchDir();
    prefix = scratch->path() + "/prefix";
    install_log = scratch->path() + "/install.log";
    auto log = Fd::open(install_log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_TRUE(log.ok());
    SpawnOptions so;
    so.argv = {CMAKE_COMMAND, "--install", VESSEL_BUILD_DIR, "--prefix", prefix};
    so.fds = {{log->get(), 1}, {log->get(), 2}};
    auto p = ChildProcess::spawn(so);
    ASSERT_TRUE(p.ok()) << p.error().message();
    auto e = p->waitFor(240s);
    ASSERT_TRUE(e.ok() && e->exited && e->code == 0) << "cmake --install failed:\n" << slurp();
    fs::create_directories(scratch->path() + "/daemon");
    d = new Vesseld(testing::VesseldOptions{prefix + "/bin/vesseld",
                                            prefix + "/share/vessel/kernel/vmlinux",
                                            prefix + "/share/vessel/images/minimal.ext4",
                                            scratch->path() + "/daemon",
                                            {"--warm-pool", "none"}});
    started = d->start();
  }
  static void TearDownTestSuite() {
    testing::endSuite(d);
    delete scratch;
    scratch = nullptr;
  }
  static std::string slurp() {
    std::ifstream f(install_log);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  void SetUp() override {
    ASSERT_TRUE(started) << "installed vesseld did not start:\n" << d->log();
  }
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

}  // namespace
}  // namespace vessel
