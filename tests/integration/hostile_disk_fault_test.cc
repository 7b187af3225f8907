// The host's disk fills up under a running node (issue 13): vesseld's state
// and cache directories are a loop-mounted ext4 of a fixed size, and a
// filler file takes all but a chosen amount of it. Below
// --min-free-disk-mib a pause and a template build are refused with a clear
// error; just above it they pass that check and then run out of space in
// the middle of writing, which must end as a clear failed operation with
// nothing half-written left: the sandbox still runs with its files, no
// template is registered, and once space is back the same pause succeeds.
// (ext4, not tmpfs: a tmpfs allocates a page for every hole of a file
// mapping that is read, so a full tmpfs kills any QEMU whose template
// memory file lives on it with SIGBUS - not what a host disk does.) Part of
// the hostile_test binary.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "base/fd.h"
#include "hostile_footprint.h"
#include "http_client.h"
#include "os/command.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::Reply;
using testing::str;
using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1 << 20;
// Small, so that just above it a pause snapshot (some 20 MiB for an idle
// minimal guest) does not fit.
constexpr uint64_t kMinFreeMib = 8;
// Room for the daemon's minimal template (its image and memory file), its
// store, one small sandbox and its pause snapshot; sparse on the host.
constexpr uint64_t kDiskMib = 1024;

class HostDiskFaultTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    dir_ = new testing::ScratchDir();
    std::string image = dir_->path() + "/disk.ext4", root = dir_->path() + "/root";
    fs::create_directories(root);
    {
      auto f = Fd::open(image, O_WRONLY | O_CREAT | O_TRUNC, 0600);  // sparse
      if (!f.ok() || ::ftruncate(f->get(), static_cast<off_t>(kDiskMib * kMiB)) != 0) {
        ADD_FAILURE() << "disk image " << image;
        return;
      }
    }
    auto made = os::runCommand({"mkfs.ext4", "-q", "-F", "-m", "0", image}, {}, 60s);
    auto mounted = made.ok() ? os::runCommand({"mount", "-o", "loop", image, root}) : made;
    if (!mounted.ok()) {
      ADD_FAILURE() << "loop-mount an ext4: " << mounted.error().message();
      return;
    }
    root_ = root;
    d_ = new testing::Vesseld(testing::VesseldOptions{
        VESSELD_PATH,
        testing::kernelPath(),
        testing::minimalImage(),
        root_,
        // No egress: this daemon is about its disk.
        {"--warm-pool", "", "--no-egress", "--min-free-disk-mib", std::to_string(kMinFreeMib)}});
    d_->setContract(testing::apiContract());
    if (!d_->start()) ADD_FAILURE() << "vesseld did not come up:\n" << d_->log();
  }
  static void TearDownTestSuite() {
    unfill();
    if (d_) testing::endSuite(d_);
    if (!root_.empty()) {
      // The loop device goes with the mount (mount -o loop sets autoclear).
      EXPECT_EQ(::umount2(root_.c_str(), 0), 0) << std::strerror(errno);
      root_.clear();
    }
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "vesseld needs root";
    ASSERT_TRUE(d_ && d_->running());
  }
  void TearDown() override { unfill(); }

  static uint64_t freeBytes() {
    struct statvfs st {};
    if (::statvfs(root_.c_str(), &st) != 0) return 0;
    return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  }
  // Takes all but `leave` bytes of the disk.
  static void fillLeaving(uint64_t leave) {
    unfill();
    uint64_t free = freeBytes();
    ASSERT_GT(free, leave) << "the disk is already fuller than the test needs";
    auto f = Fd::open(filler(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_TRUE(f.ok());
    ASSERT_EQ(::fallocate(f->get(), 0, 0, static_cast<off_t>(free - leave)), 0)
        << std::strerror(errno);
  }
  static void unfill() {
    if (!root_.empty()) ::unlink(filler().c_str());
  }
  static std::string filler() { return root_ + "/filler"; }
  static std::string start(const std::string& id, const std::string& action, Reply* refused) {
    Reply r = d_->call("POST", "/v1/sandboxes/" + id + ":" + action);
    if (r.status != 202) {
      *refused = r;
      return "";
    }
    return str(r.js().at("operation"), "id");
  }
  static std::string opError(const std::string& op) {
    auto v = d_->call("GET", "/v1/operations/" + op).js();
    if (!v.is_object() || !v.as_object().contains("error")) return "";
    return str(v.at("error"), "message");
  }

  static testing::ScratchDir* dir_;
  static std::string root_;  // the mounted ext4: the daemon's state and cache
  static testing::Vesseld* d_;
};

testing::ScratchDir* HostDiskFaultTest::dir_ = nullptr;
std::string HostDiskFaultTest::root_;
testing::Vesseld* HostDiskFaultTest::d_ = nullptr;

TEST_F(HostDiskFaultTest, PauseOnANearlyFullDiskFailsCleanlyAndTheSandboxRunsOn) {
  std::string why;
  std::string id = d_->createSandbox(R"({"disk_mib":128})", &why);
  ASSERT_FALSE(id.empty()) << why;
  ASSERT_EQ(d_->sh(id, "echo keep > /home/user/mark && sync && cat /home/user/mark"), "keep\n");
  std::string state = d_->stateDir();

  // Below the threshold: refused before anything is written.
  fillLeaving(kMinFreeMib / 2 * kMiB);
  Reply refused;
  EXPECT_EQ(start(id, "pause", &refused), "");
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("pause refused: the state disk is nearly full"));

  // Just above it: the check passes, the guest's memory does not fit.
  fillLeaving((kMinFreeMib + 2) * kMiB);
  uint64_t before = testing::allocatedUnder(state);
  std::string op = start(id, "pause", &refused);
  ASSERT_FALSE(op.empty()) << refused.body;
  EXPECT_EQ(d_->finish(op), "failed") << d_->log();
  std::string error = opError(op);
  EXPECT_THAT(error, HasSubstr("No space left on device")) << error;
  // Nothing half-written is left, and the sandbox runs on with its files.
  EXPECT_LE(testing::allocatedUnder(state), before + kMiB) << "a partial snapshot was left";
  Reply got = d_->call("GET", "/v1/sandboxes/" + id);
  EXPECT_EQ(str(got.js(), "state"), "running") << got.body;
  EXPECT_EQ(d_->sh(id, "cat /home/user/mark"), "keep\n");

  // Space back: the same pause and a resume work.
  unfill();
  op = start(id, "pause", &refused);
  ASSERT_FALSE(op.empty()) << refused.body;
  EXPECT_EQ(d_->finish(op), "done") << opError(op);
  op = start(id, "resume", &refused);
  ASSERT_FALSE(op.empty()) << refused.body;
  EXPECT_EQ(d_->finish(op), "done") << opError(op);
  EXPECT_EQ(d_->sh(id, "cat /home/user/mark"), "keep\n");
  EXPECT_TRUE(d_->deleteSandbox(id));
}

// A guest writes while the host's disk is full: its writable layer cannot
// grow. The write fails in the guest with an I/O error and the sandbox keeps
// answering (the disk is `werror=report`); QEMU's default would stop the VM
// and leave a sandbox that shows running with an agent that never answers.
TEST_F(HostDiskFaultTest, GuestWriteOnAFullHostDiskFailsInTheGuestNotTheVm) {
  std::string why;
  std::string id = d_->createSandbox(R"({"disk_mib":128})", &why);
  ASSERT_FALSE(id.empty()) << why;
  fillLeaving(kMiB);
  // Direct I/O: the data writes themselves meet the full host disk. A
  // deadline of its own: a stopped VM would never answer.
  testing::Request x;
  x.method = "POST";
  x.target = "/v1/exec";
  x.bearer = d_->session(id);
  x.body = R"({"user":"root","shell":"dd if=/dev/zero of=/home/user/big bs=1M count=64 )"
           R"(oflag=direct 2>&1; echo rc=$?"})";
  x.deadline = 60s;
  auto done = testing::collectExec(testing::call(d_->dataPort(), x).body);
  std::string out = done.out + done.err;
  EXPECT_THAT(out, HasSubstr("rc=")) << "the write did not come back within 60 s: " << out;
  EXPECT_THAT(out, ::testing::Not(HasSubstr("rc=0"))) << out;
  EXPECT_THAT(out, HasSubstr("Input/output error")) << out;
  std::printf("a guest write on a full host disk: %s\n", out.c_str());
  Reply got = d_->call("GET", "/v1/sandboxes/" + id);
  EXPECT_EQ(str(got.js(), "state"), "running") << got.body;
  EXPECT_EQ(d_->sh(id, "echo ok"), "ok\n") << "the sandbox stopped answering";
  unfill();
  EXPECT_EQ(d_->sh(id, "rm -f /home/user/big; echo ok"), "ok\n");
  EXPECT_TRUE(d_->deleteSandbox(id));
}

TEST_F(HostDiskFaultTest, TemplateBuildOnANearlyFullDiskLeavesNoTemplate) {
  const std::string spec = R"({"name":"full-disk","commands":["echo built > /etc/built"]})";
  auto templates = [] { return d_->call("GET", "/v1/templates").body; };
  std::string store = d_->cacheDir() + "/templates";

  // Below the threshold: the build is queued and refused before it writes.
  fillLeaving(kMinFreeMib / 2 * kMiB);
  Reply r = d_->call("POST", "/v1/templates", spec);
  ASSERT_EQ(r.status, 202) << r.body;
  std::string op = str(r.js().at("operation"), "id");
  EXPECT_EQ(d_->finish(op), "failed");
  EXPECT_THAT(opError(op), HasSubstr("the state disk is nearly full"));

  // Above it, but short of what the build may need (its memory file can
  // grow to the guest's 256 MiB): refused before it boots, rather than a
  // build VM killed by SIGBUS half-way.
  fillLeaving(64 * kMiB);
  r = d_->call("POST", "/v1/templates", spec);
  ASSERT_EQ(r.status, 202) << r.body;
  op = str(r.js().at("operation"), "id");
  EXPECT_EQ(d_->finish(op), "failed") << d_->log();
  EXPECT_THAT(opError(op), HasSubstr("refused: it may need up to"));
  EXPECT_THAT(templates(), ::testing::Not(HasSubstr("full-disk")));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(store, ec))
    EXPECT_EQ(e.path().filename().string().find("full-disk"), std::string::npos)
        << "left in the template store: " << e.path();

  // Room for the build, until the disk fills up while the build VM boots.
  unfill();
  r = d_->call("POST", "/v1/templates", spec);
  ASSERT_EQ(r.status, 202) << r.body;
  op = str(r.js().at("operation"), "id");
  Reply booting =
      d_->call("GET", "/v1/operations/" + op + "/events", "", "-", {}, [](const std::string& b) {
        return b.find("boot base") != std::string::npos ||
               b.find("operation.done") != std::string::npos ||
               b.find("operation.failed") != std::string::npos;
      });
  ASSERT_THAT(booting.body, HasSubstr("boot base"));
  fillLeaving(kMiB);
  EXPECT_EQ(d_->finish(op), "failed") << d_->log();
  // Its VM dies of SIGBUS once a page of its (shared, sparse) memory file
  // cannot be backed; the error says so, or the ENOSPC of a later write.
  std::string error = opError(op);
  std::printf("a build on a disk that filled up under it: %s\n", error.c_str());
  EXPECT_THAT(error, ::testing::AnyOf(HasSubstr("is that disk full?"),
                                      HasSubstr("No space left on device")));
  EXPECT_THAT(templates(), ::testing::Not(HasSubstr("full-disk")));
  for (const auto& e : fs::directory_iterator(store, ec))
    EXPECT_EQ(e.path().filename().string().find("full-disk"), std::string::npos)
        << "left in the template store: " << e.path();

  // No build VM is left either, and the node still makes sandboxes.
  unfill();
  EXPECT_THAT(testing::qemuProcessesUsing(d_->root()), ::testing::IsEmpty());
  std::string why;
  std::string id = d_->createSandbox("{}", &why);
  ASSERT_FALSE(id.empty()) << why;
  EXPECT_EQ(d_->sh(id, "echo ok"), "ok\n");
  EXPECT_TRUE(d_->deleteSandbox(id));
}

}  // namespace
}  // namespace vessel
