#include "hypervisor/qemu/argv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vessel::hypervisor::qemu {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

MachineSpec spec() {
  MachineSpec s;
  s.id = "sb-1";
  s.vcpus = 2;
  s.memory_mib = 512;
  s.kernel = "/k/vmlinux";
  s.cmdline = "init=/sbin/vessel-agent";
  s.disks = {{"/img/root.ext4", true, "raw"}};
  s.run_dir = "/run/vm";
  s.console_log = "/run/console.log";
  return s;
}

std::string after(const std::vector<std::string>& a, const std::string& flag, int nth = 0) {
  for (size_t i = 0; i + 1 < a.size(); ++i)
    if (a[i] == flag && nth-- == 0) return a[i + 1];
  return "";
}

TEST(QemuArgvTest, OnlyATcgGuestIsToldTheTscRate) {
  auto s = spec();
  s.accel = Accel::kKvm;  // kvm-clock: nothing to tell
  auto a = buildArgv(s, {"qemu", "/r/q.sock", "/r/c.sock", "/r/a.sock"});
  EXPECT_THAT(after(a, "-append"), Not(HasSubstr("tsc")));
  s.accel = Accel::kTcg;
  a = buildArgv(s, {"qemu", "/r/q.sock", "/r/c.sock", "/r/a.sock"});
  EXPECT_THAT(after(a, "-append"), HasSubstr(" tsc=reliable"));
}

TEST(QemuArgvTest, MicrovmWithVirtioMmioOnly) {
  auto a = buildArgv(spec(), {"qemu", "/r/q.sock", "/r/c.sock", "/r/a.sock"});
  EXPECT_EQ(a[0], "qemu");
  EXPECT_EQ(after(a, "-M"),
            "microvm,x-option-roms=off,isa-serial=off,rtc=on,acpi=off,memory-backend=mem");
  EXPECT_THAT(a, Contains("-nodefaults"));
  EXPECT_THAT(a, Contains("-no-reboot"));
  EXPECT_THAT(a, Contains("-S"));
  EXPECT_EQ(after(a, "-smp"), "2");
  EXPECT_EQ(after(a, "-m"), "512M");
  EXPECT_EQ(after(a, "-accel"), "tcg");
  for (const auto& x : a) EXPECT_THAT(x, Not(HasSubstr("-pci")));
  // TCG: the host's TSC rate (measured, so only its shape is checked).
  EXPECT_THAT(after(a, "-append"),
              ::testing::MatchesRegex("console=hvc0 panic=-1 reboot=t tsc_early_khz=[1-9][0-9]* "
                                      "tsc=reliable root=/dev/vda rootfstype=ext4 ro "
                                      "init=/sbin/vessel-agent"));
  EXPECT_EQ(after(a, "-drive"),
            "id=disk0,file=/img/root.ext4,format=raw,if=none,discard=unmap,readonly=on");
  EXPECT_EQ(after(a, "-device", 1), "virtconsole,chardev=console");
  EXPECT_EQ(after(a, "-device", 2), "virtserialport,chardev=agent,name=vessel.agent");
  EXPECT_THAT(after(a, "-sandbox"), HasSubstr("spawn=deny"));
  EXPECT_EQ(after(a, "-object", 0), "memory-backend-ram,id=mem,size=512M");
  EXPECT_THAT(a, Not(Contains("-incoming")));
  EXPECT_THAT(a, Not(Contains("-netdev")));
}

TEST(QemuArgvTest, AnOverlaysBackingIsTheSpecsNotItsHeaders) {
  auto s = spec();
  s.disks = {{"/vm/disk.qcow2", false, "qcow2", "/cache/t/1/rootfs.ext4", "raw"}};
  auto a = buildArgv(s, {"qemu", "/r/q.sock", "/r/c.sock", "/r/a.sock"});
  EXPECT_EQ(after(a, "-drive"),
            "id=disk0,file=/vm/disk.qcow2,format=qcow2,if=none,discard=unmap,backing.driver=raw,"
            "backing.file.driver=file,backing.file.filename=/cache/t/1/rootfs.ext4,werror=report");
  // An overlay without one has no backing option (and start() refuses a
  // header that names one).
  s.disks[0].backing.clear();
  a = buildArgv(s, {"qemu", "/r/q.sock", "/r/c.sock", "/r/a.sock"});
  EXPECT_THAT(after(a, "-drive"), Not(HasSubstr("backing")));
}

TEST(QemuArgvTest, NetworkDeviceWithoutTapIsConnectedToNothing) {
  MachineSpec s = spec();
  s.network_device = true;
  auto a = buildArgv(s, {"qemu", "/q", "/c", "/a"});
  EXPECT_EQ(after(a, "-netdev"), "hubport,id=net0,hubid=0");
  EXPECT_THAT(a, Contains(HasSubstr("virtio-net-device,netdev=net0")));
}

TEST(QemuArgvTest, KvmTapMemoryFileAndIncoming) {
  MachineSpec s = spec();
  s.accel = Accel::kKvm;
  s.tap_fd = 17;
  s.memory_file = "/t/mem";
  s.memory_shared = false;
  s.incoming = true;
  s.disks[0].read_only = false;
  s.disks[0].format = "qcow2";
  auto a = buildArgv(s, {"qemu", "/q", "/c", "/a"});
  EXPECT_EQ(after(a, "-accel"), "kvm");
  EXPECT_EQ(after(a, "-cpu"), "host");
  EXPECT_EQ(after(a, "-netdev"), "tap,id=net0,fd=3");
  EXPECT_EQ(after(a, "-object", 0),
            "memory-backend-file,id=mem,size=512M,mem-path=/t/mem,share=off");
  EXPECT_THAT(after(a, "-M"), HasSubstr("memory-backend=mem"));
  EXPECT_EQ(after(a, "-incoming"), "defer");
  EXPECT_THAT(after(a, "-append"), HasSubstr(" rw "));
  EXPECT_THAT(after(a, "-drive"), Not(HasSubstr("readonly")));
  EXPECT_THAT(after(a, "-drive"), HasSubstr("format=qcow2"));
  // A full host disk is an error for the guest's write, not a stopped VM.
  EXPECT_THAT(after(a, "-drive"), HasSubstr(",werror=report"));
}

}  // namespace
}  // namespace vessel::hypervisor::qemu
