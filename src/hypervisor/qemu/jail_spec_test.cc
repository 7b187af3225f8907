// What a QEMU's jail holds for a MachineSpec, and the qcow2 backing chain
// checked against the one template image a disk may be backed by (real
// qemu-img images).
#include "hypervisor/qemu/jail_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/child_process.h"

namespace vessel::hypervisor::qemu {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::Field;
using ::testing::Not;

class JailSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/vessel-jailspec-XXXXXX";
    dir_ = ::mkdtemp(t);
    fs::create_directories(dir_ + "/cache");
    fs::create_directories(dir_ + "/state/vm/run");
    std::ofstream(dir_ + "/cache/rootfs.ext4").put('x');
    std::ofstream(dir_ + "/state/vessel.db").put('x');
    std::ofstream(dir_ + "/kernel").put('x');
  }
  void TearDown() override { fs::remove_all(dir_); }
  bool overlay(const std::string& path, const std::string& backing) {
    SpawnOptions so;
    so.argv = {"qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", backing, path};
    auto c = ChildProcess::spawn(so);
    if (!c.ok()) return false;
    auto st = c->waitFor(std::chrono::seconds(30));
    return st.ok() && st->success();
  }
  MachineSpec spec(const std::string& disk, const std::string& backing) {
    MachineSpec s;
    s.id = "vm";
    s.kernel = dir_ + "/kernel";
    s.disks = {{disk, false, "qcow2", backing, "raw"}};
    s.run_dir = dir_ + "/state/vm/run";
    s.memory_file = dir_ + "/cache/memory";
    s.memory_mib = 256;
    s.vcpus = 2;
    return s;
  }
  std::string dir_;
};

TEST_F(JailSpecTest, HoldsTheVmsFilesAndNothingElse) {
  std::string disk = dir_ + "/state/vm/disk.qcow2";
  ASSERT_TRUE(overlay(disk, dir_ + "/cache/rootfs.ext4"));
  EXPECT_TRUE(checkDiskHeaders(spec(disk, dir_ + "/cache/rootfs.ext4")).ok());

  JailOptions o;
  o.memfile_shim = "/usr/lib/shim.so";
  o.backing_roots = {dir_ + "/cache"};
  auto j = jailSpecFor(spec(disk, dir_ + "/cache/rootfs.ext4"), o, "/usr/bin/qemu-system-x86_64");
  ASSERT_TRUE(j.ok()) << j.error().message();
  auto has = [&](const std::string& p, bool writable) {
    for (const auto& m : j->mounts)
      if (m.path == p) return m.writable == writable;
    return false;
  };
  EXPECT_TRUE(has(disk, true));
  EXPECT_TRUE(has(dir_ + "/cache/rootfs.ext4", false)) << "the backing file, read-only";
  EXPECT_TRUE(has(dir_ + "/cache/memory", false)) << "the template's memory, read-only";
  EXPECT_TRUE(has(dir_ + "/kernel", false));
  EXPECT_TRUE(has(dir_ + "/state/vm/run", true));
  EXPECT_TRUE(has("/usr", false));
  EXPECT_THAT(j->mounts, Not(Contains(Field(&os::BindMount::path, dir_ + "/state/vessel.db"))));
  EXPECT_THAT(j->owned, ::testing::UnorderedElementsAre(disk, dir_ + "/state/vm/run"));
  EXPECT_EQ(j->limits.memory_bytes, (256ull + o.memory_overhead_mib) << 20);
  EXPECT_EQ(j->limits.cpu_quota_us, 300000u);
  // Its I/O: a weight, and caps on the device its disk is on (if it has one).
  EXPECT_EQ(j->limits.io_weight, o.io_weight);
  auto dev = os::blockDeviceOf(disk);
  ASSERT_TRUE(dev.ok());
  if (*dev) {
    ASSERT_EQ(j->limits.io_max.size(), 1u);
    EXPECT_EQ(j->limits.io_max[0].major, (*dev)->first);
    EXPECT_EQ(j->limits.io_max[0].minor, (*dev)->second);
    EXPECT_EQ(j->limits.io_max[0].wbps, o.io_bps);
    EXPECT_EQ(j->limits.io_max[0].riops, o.io_iops);
  }
  EXPECT_TRUE(j->devices.empty()) << "no /dev/kvm under TCG";
  auto s = spec(disk, dir_ + "/cache/rootfs.ext4");
  s.accel = Accel::kKvm;
  auto k = jailSpecFor(s, o, "/usr/bin/qemu-system-x86_64");
  ASSERT_TRUE(k.ok()) << k.error().message();
  ASSERT_EQ(k->devices.size(), 1u);
  EXPECT_EQ(k->devices[0].path, "/dev/kvm") << "a node of its own, not the host's bind-mounted";
  EXPECT_THAT(k->mounts, Not(Contains(Field(&os::BindMount::path, "/dev/kvm"))));
}

TEST_F(JailSpecTest, BackingFileOutsideTheImageRootsIsRefused) {
  // What a QEMU that rewrote its overlay's header would ask for next start.
  std::string disk = dir_ + "/state/vm/disk.qcow2";
  ASSERT_TRUE(overlay(disk, dir_ + "/state/vessel.db"));
  auto h = checkDiskHeaders(spec(disk, dir_ + "/cache/rootfs.ext4"));
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(h.error().message(), ::testing::HasSubstr("tampered"));
  // And a spec that named such a file would get no jail either.
  JailOptions o;
  o.memfile_shim = "/usr/lib/shim.so";
  o.backing_roots = {dir_ + "/cache"};
  auto j = jailSpecFor(spec(disk, dir_ + "/state/vessel.db"), o, "/usr/bin/qemu-system-x86_64");
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(j.error().message(), ::testing::HasSubstr("outside the image roots"));
}

TEST_F(JailSpecTest, AnotherTemplatesImageInTheCacheIsNeitherAcceptedNorLent) {
  // Under the image roots, so the old rule (any file under the cache dir)
  // let it through: another tenant's template.
  std::ofstream(dir_ + "/cache/other-rootfs.ext4").put('y');
  std::string disk = dir_ + "/state/vm/disk.qcow2";
  ASSERT_TRUE(overlay(disk, dir_ + "/cache/other-rootfs.ext4"));
  auto h = checkDiskHeaders(spec(disk, dir_ + "/cache/rootfs.ext4"));
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(h.error().message(), ::testing::HasSubstr("other-rootfs.ext4"));
  JailOptions o;
  o.memfile_shim = "/usr/lib/shim.so";
  o.backing_roots = {dir_ + "/cache"};
  auto j = jailSpecFor(spec(disk, dir_ + "/cache/rootfs.ext4"), o, "/usr/bin/qemu-system-x86_64");
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_THAT(j->mounts,
              Not(Contains(Field(&os::BindMount::path, dir_ + "/cache/other-rootfs.ext4"))));
  EXPECT_THAT(j->mounts, Contains(Field(&os::BindMount::path, dir_ + "/cache/rootfs.ext4")));
}

}  // namespace
}  // namespace vessel::hypervisor::qemu
