// QemuHypervisor's disk tools on real qemu-img images, with the jail
// vesseld runs QEMU in: a flatten (fork into a template) refuses an
// overlay whose header names another file, runs as a uid of the VM range,
// and takes the backing it was told, never the header's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>

#include "base/child_process.h"
#include "base/run_blocking.h"
#include "hypervisor/qemu/qemu.h"

namespace vessel::hypervisor::qemu {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

bool run(std::vector<std::string> argv) {
  SpawnOptions so;
  so.argv = std::move(argv);
  auto c = ChildProcess::spawn(so);
  if (!c.ok()) return false;
  auto st = c->waitFor(std::chrono::seconds(60));
  return st.ok() && st->success();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// `size` bytes of `marker` lines, mode `mode`, root's.
void fill(const std::string& path, const std::string& marker, size_t size, mode_t mode) {
  std::ofstream out(path, std::ios::binary);
  std::string line = marker + "\n";
  for (size_t n = 0; n + line.size() <= size; n += line.size()) out << line;
  out.close();
  fs::resize_file(path, size);
  ::chmod(path.c_str(), mode);
}

class QemuDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the jail needs root";
    auto c = os::detectCgroups("/sys/fs/cgroup", "vessel-test");
    if (!c.ok()) GTEST_SKIP() << c.error().message();
    char t[] = "/tmp/vessel-disk-XXXXXX";
    dir_ = ::mkdtemp(t);
    ::chmod(dir_.c_str(), 0755);
    auto uids = os::UidPool::open({320000, 320099}, dir_ + "/leases", dir_);
    ASSERT_TRUE(uids.ok());
    JailOptions jo;
    jo.jailer = {*uids, *c, dir_ + "/jail", "dt" + std::to_string(::getpid()) + "-"};
    jo.backing_roots = {dir_ + "/cache"};
    QemuOptions qo;
    qo.jail = jo;
    hv_ = std::make_unique<QemuHypervisor>(qo);
    fs::create_directories(dir_ + "/cache");
    fs::create_directories(dir_ + "/staging");
    base_ = dir_ + "/cache/rootfs.ext4";
    fill(base_, "TEMPLATE-IMAGE", 4 << 20, 0644);
  }
  void TearDown() override {
    hv_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
    auto c = os::detectCgroups("/sys/fs/cgroup", "vessel-test");
    if (c.ok())
      for (const auto& d : os::Cgroup::dirsFor(*c, "x")) ::rmdir(fs::path(d).parent_path().c_str());
  }
  // An overlay whose header names `backing`, as a QEMU that rewrote it
  // would leave it.
  std::string overlay(const std::string& backing) {
    std::string p = dir_ + "/staging/overlay.qcow2";
    EXPECT_TRUE(run({"qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", backing, p}));
    ::chmod(p.c_str(), 0600);
    return p;
  }
  Status flatten(const std::string& ov, const std::string& to) {
    Disk d{ov, true, "qcow2", base_, "raw"};
    return runBlocking(io_, hv_->flattenDisk(std::move(d), to, 0));
  }
  boost::asio::io_context io_;
  std::unique_ptr<QemuHypervisor> hv_;
  std::string dir_, base_;
};

TEST_F(QemuDiskTest, FlattenOfAnOverlayNamingAHostFileIsRefused) {
  // A root-only host file (as /etc/shadow is), and a file under the
  // cache dir that is not this sandbox's template's image.
  std::string host = dir_ + "/host-secret";
  fill(host, "HOST-SECRET", 4 << 20, 0600);
  std::string other = dir_ + "/cache/other-rootfs.ext4";
  fill(other, "OTHER-TENANT", 4 << 20, 0644);
  for (const std::string& named : {host, other}) {
    std::string ov = overlay(named);
    std::string to = dir_ + "/staging/rootfs.ext4";
    Status s = flatten(ov, to);
    ASSERT_FALSE(s.ok()) << named << ": flattened";
    EXPECT_THAT(s.error().message(), HasSubstr("tampered")) << named;
    std::string out = slurp(to);
    EXPECT_EQ(out.find("HOST-SECRET"), std::string::npos);
    EXPECT_EQ(out.find("OTHER-TENANT"), std::string::npos);
    fs::remove(ov);
    fs::remove(to);
  }
  // A json: pseudo-protocol name for the host file, and an external raw
  // data file holding it.
  std::string js = dir_ + "/staging/json.qcow2";
  ASSERT_TRUE(run({"qemu-img", "create", "-q", "-f", "qcow2", "-u", "-F", "raw", "-b",
                   R"(json:{"driver":"raw","file":{"driver":"file","filename":")" + host + "\"}}",
                   js, "4M"}));
  std::string df = dir_ + "/staging/data.qcow2", data = dir_ + "/data.raw";
  // (QEMU allows no backing file beside a raw data file.)
  ASSERT_TRUE(run({"qemu-img", "create", "-q", "-f", "qcow2", "-o",
                   "data_file=" + data + ",data_file_raw=on", df, "4M"}));
  fill(data, "HOST-SECRET", 4 << 20, 0600);
  for (const std::string& ov : {js, df}) {
    std::string to = dir_ + "/staging/rootfs.ext4";
    Status s = flatten(ov, to);
    ASSERT_FALSE(s.ok()) << ov << ": flattened";
    EXPECT_THAT(s.error().message(), HasSubstr("qcow2 header")) << ov;
    EXPECT_EQ(slurp(to).find("HOST-SECRET"), std::string::npos) << ov;
    fs::remove(to);
  }
}

TEST_F(QemuDiskTest, FlattenRunsAsAVmUidAndTakesTheBackingItIsGiven) {
  std::string ov = overlay(base_);
  // What the sandbox wrote: its first 64 KiB.
  ASSERT_TRUE(run({"qemu-io", "-f", "qcow2", "-c", "write -P 0x41 0 64k", ov}));
  std::string to = dir_ + "/staging/rootfs.ext4";
  Status s = flatten(ov, to);
  ASSERT_TRUE(s.ok()) << s.error().message();
  std::string out = slurp(to);
  ASSERT_EQ(out.size(), 4u << 20);
  EXPECT_EQ(out.substr(0, 65536), std::string(65536, 'A'));
  EXPECT_EQ(out.substr(65536), slurp(base_).substr(65536)) << "the rest is the template's";
  // Given back as the template's image must be: root's, readable by every VM.
  struct stat st {};
  ASSERT_EQ(::stat(to.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  ASSERT_EQ(::stat(ov.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  fs::remove(to);

  // qemu-img runs as a uid of the VM range, not root: a template image
  // only root can read is out of its reach (root would have read it).
  ::chmod(base_.c_str(), 0600);
  s = flatten(ov, to);
  ASSERT_FALSE(s.ok()) << "qemu-img read a root-only file: it ran with root's rights";
  // ... and that file's mode was the only reason.
  fs::remove(to);
  ::chmod(base_.c_str(), 0644);
  s = flatten(ov, to);
  EXPECT_TRUE(s.ok()) << s.error().message();
}

TEST_F(QemuDiskTest, StartRefusesADiskWhoseHeaderNamesAnotherFile) {
  std::string host = dir_ + "/host-secret";
  fill(host, "HOST-SECRET", 1 << 20, 0600);
  MachineSpec s;
  s.id = "vm-1";
  s.kernel = base_;  // never booted: refused before any QEMU starts
  s.disks = {{overlay(host), false, "qcow2", base_, "raw"}};
  s.run_dir = dir_ + "/run";
  s.console_log = dir_ + "/console.log";
  auto vm = runBlocking(io_, hv_->start(s, Clock::now() + std::chrono::seconds(10)));
  ASSERT_FALSE(vm.ok());
  EXPECT_THAT(vm.error().message(), HasSubstr("its header names backing file '" + host + "'"));
  EXPECT_FALSE(fs::exists(s.run_dir)) << "nothing of it was made";
}

// A tool run on a VM's files sees no host process: it is PID 1 of a PID
// namespace of its own (what a hostile image made it start dies with it)
// and runs as a VM uid, not root. Its network and IPC namespaces are the
// jail's (os/jail_namespaces_test.cc).
TEST_F(QemuDiskTest, AConfinedToolIsPidOneOfItsOwnNamespaceAndNotRoot) {
  std::string out = dir_ + "/staging/probe.txt";
  { std::ofstream touch(out); }
  ::chmod(out.c_str(), 0600);
  std::vector<std::string> argv = {"/bin/sh", "-c", "{ echo pid=$$; echo uid=$(id -u); } > " + out};
  std::vector<os::BindMount> files = {{out, true, false, false}};
  std::vector<std::string> owned = {out};
  Status s = runBlocking(io_, hv_->runConfined(std::move(argv), std::move(files), std::move(owned),
                                               std::chrono::seconds(30), "probe"));
  ASSERT_TRUE(s.ok()) << s.error().message();
  std::string got = slurp(out);
  EXPECT_THAT(got, HasSubstr("pid=1\n"));
  EXPECT_THAT(got, ::testing::Not(HasSubstr("uid=0\n")));
}

}  // namespace
}  // namespace vessel::hypervisor::qemu
