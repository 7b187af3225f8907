// Boots real QEMU microVMs (TCG here) and checks the foundation's promises:
// guests reach ready and stop cleanly, several boot at once, bad input is a
// clear Error and not a hang, and nothing is left behind by any test.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/fd.h"
#include "base/run_blocking.h"
#include "guest_env.h"
#include "hypervisor/qemu/qemu.h"
#include "node/accel.h"
#include "node/machine.h"
#include "os/cgroup.h"
#include "os/jail.h"

namespace vessel {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using hypervisor::MachineSpec;
using ::testing::HasSubstr;
using testing::minimalSpec;
using testing::ScratchDir;
using ::testing::UnorderedElementsAre;

class BootTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // No QEMU process of this test may outlive it, and its run dirs are
    // gone: only console logs may remain in the scratch directory.
    EXPECT_THAT(testing::qemuProcessesFor(prefix_), ::testing::IsEmpty());
    for (const auto& f : dir_.files())
      EXPECT_TRUE(f.size() > 12 && f.substr(f.size() - 12) == ".console.log")
          << "left behind: " << f;
  }
  Result<node::Machine> boot(MachineSpec s, std::chrono::seconds d = 30s) {
    return runBlocking(io_, node::bootMachine(hv_, std::move(s), node::Clock::now() + d));
  }
  void stop(node::Machine& m) { EXPECT_TRUE(runBlocking(io_, m.vm->stop()).ok()); }
  std::string id(const std::string& suffix) { return prefix_ + suffix; }

  asio::io_context io_;
  hypervisor::qemu::QemuHypervisor hv_{{}};
  ScratchDir dir_;
  std::string prefix_ = "bt" + std::to_string(::getpid()) + "-";
};

TEST_F(BootTest, BootsToReadyAndStops) {
  MachineSpec s = minimalSpec(id("one"), dir_);
  std::string run_dir = s.run_dir, console = s.console_log;
  auto m = boot(s);
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_THAT(m->hello.agent_version, HasSubstr("vessel-agent"));
  pid_t pid = m->vm->pid();
  EXPECT_EQ(::kill(pid, 0), 0);
  struct stat st {};
  EXPECT_EQ(::stat((run_dir + "/qmp.sock").c_str(), &st), 0);
  stop(*m);
  EXPECT_NE(::kill(pid, 0), 0) << "qemu still exists after stop";
  EXPECT_NE(::stat(run_dir.c_str(), &st), 0) << "run dir left behind";
  // The console captured the guest kernel's boot messages.
  auto log = readFile(console, 1 << 20);
  ASSERT_TRUE(log.ok());
  EXPECT_THAT(*log, HasSubstr("Run /sbin/vessel-agent as init process"));
}

TEST_F(BootTest, FourMachinesBootAtOnce) {
  std::vector<std::optional<Result<node::Machine>>> results(4);
  for (int i = 0; i < 4; ++i) {
    asio::co_spawn(
        io_,
        [&, i]() -> asio::awaitable<void> {
          results[i] = co_await node::bootMachine(
              hv_, minimalSpec(id("par" + std::to_string(i)), dir_), node::Clock::now() + 60s);
        },
        asio::detached);
  }
  auto all_done = [&] {
    for (auto& r : results)
      if (!r) return false;
    return true;
  };
  while (!all_done()) io_.run_one_for(20ms);
  std::set<pid_t> pids;
  for (auto& r : results) {
    ASSERT_TRUE(r->ok()) << r->error().message();
    pids.insert((*r)->vm->pid());
  }
  EXPECT_EQ(pids.size(), 4u);
  for (auto& r : results) stop(**r);
}

TEST_F(BootTest, MissingKernelIsNotFound) {
  MachineSpec s = minimalSpec(id("nokernel"), dir_);
  s.kernel = dir_.path() + "/no-such-vmlinux";
  auto m = boot(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), Code::kNotFound);
  EXPECT_THAT(m.error().message(), HasSubstr("kernel " + s.kernel));
}

TEST_F(BootTest, CorruptKernelReportsQemusReason) {
  MachineSpec s = minimalSpec(id("badkernel"), dir_);
  s.kernel = dir_.path() + "/garbage-vmlinux";
  {
    std::ofstream f(s.kernel, std::ios::binary);
    for (int i = 0; i < 100000; ++i) f.put(static_cast<char>((i * 7919) & 0xff));
  }
  auto m = boot(s);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.error().message(), HasSubstr("qemu"));
  EXPECT_THAT(m.error().message(), HasSubstr("qemu stderr:"));
  std::remove(s.kernel.c_str());
}

TEST_F(BootTest, MissingImageIsNotFound) {
  MachineSpec s = minimalSpec(id("noimage"), dir_);
  s.disks[0].path = dir_.path() + "/no-such-root.ext4";
  auto m = boot(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), Code::kNotFound);
  EXPECT_THAT(m.error().message(), HasSubstr("no-such-root.ext4"));
}

TEST_F(BootTest, MemoryZeroOrAboveHostIsInvalid) {
  MachineSpec s = minimalSpec(id("mem"), dir_);
  s.memory_mib = 0;
  auto m = boot(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), Code::kInvalidArgument);
  s.memory_mib = 1ull << 30;  // a PiB
  m = boot(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(m.error().message(), HasSubstr("exceeds the host"));
}

// Kills QEMU the moment it has started, before the guest can say Hello.
class KillingHypervisor : public hypervisor::Hypervisor {
 public:
  explicit KillingHypervisor(hypervisor::Hypervisor& inner) : inner_(inner) {}
  std::string_view name() const override { return "killing"; }
  asio::awaitable<Result<std::unique_ptr<hypervisor::Vm>>> start(
      MachineSpec spec, hypervisor::Clock::time_point deadline) override {
    auto vm = co_await inner_.start(std::move(spec), deadline);
    if (vm.ok()) ::kill((*vm)->pid(), SIGKILL);
    co_return vm;
  }

 private:
  hypervisor::Hypervisor& inner_;
};

TEST_F(BootTest, QemuKilledMidBootIsAnError) {
  KillingHypervisor killer(hv_);
  auto m = runBlocking(
      io_, node::bootMachine(killer, minimalSpec(id("killed"), dir_), node::Clock::now() + 30s));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), Code::kUnavailable);
  EXPECT_THAT(m.error().message(), HasSubstr("signal 9"));
}

TEST_F(BootTest, GuestThatNeverReportsReadyHitsTheDeadline) {
  MachineSpec s = minimalSpec(id("silent"), dir_);
  s.cmdline = "init=/bin/sh";  // boots fine, waits on its console, never says Hello
  auto t0 = node::Clock::now();
  auto m = boot(s, 4s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), Code::kDeadlineExceeded) << m.error().message();
  EXPECT_LT(node::Clock::now() - t0, 20s) << "deadline not honoured";
}

TEST_F(BootTest, AutoAccelEndsOnAWorkingAcceleratorAndRemembersIt) {
  ScratchDir cache;
  node::ProbeInputs in{testing::kernelPath(),
                       testing::minimalImage(),
                       "init=/sbin/vessel-agent",
                       dir_.path() + "/" + id("probe"),
                       cache.path(),
                       "test-qemu"};
  in.deadline = 5s;
  // Three kinds of host: a KVM that boots Linux, one that opens but cannot
  // (both probed once, the verdict remembered), and none at all (nothing
  // to probe: TCG at once, nothing cached, every start says why).
  bool kvm_opens = Fd::open("/dev/kvm", O_RDWR).ok();
  auto first = runBlocking(io_, node::chooseAccel(node::AccelMode::kAuto, hv_, in));
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_FALSE(first->cached);
  EXPECT_FALSE(first->reason.empty());
  auto second = runBlocking(io_, node::chooseAccel(node::AccelMode::kAuto, hv_, in));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->accel, first->accel);
  EXPECT_EQ(second->reason, first->reason);
  std::error_code ec;
  bool remembered = std::filesystem::exists(cache.path() + "/accel", ec) &&
                    !std::filesystem::is_empty(cache.path() + "/accel", ec);
  if (kvm_opens) {
    EXPECT_TRUE(second->cached);
    EXPECT_TRUE(remembered);
  } else {
    EXPECT_EQ(first->accel, hypervisor::Accel::kTcg);
    EXPECT_THAT(first->reason, HasSubstr("KVM unavailable"));
    EXPECT_FALSE(second->cached);
    EXPECT_FALSE(remembered) << "nothing was probed, so nothing may be remembered";
  }
  // Whatever was chosen must actually boot a guest.
  MachineSpec s = minimalSpec(id("chosen"), dir_);
  s.accel = first->accel;
  auto m = boot(s);
  ASSERT_TRUE(m.ok()) << hypervisor::accelName(first->accel) << ": " << m.error().message();
  stop(*m);
}

// QEMU's stderr is QEMU's to fill (a taken-over one may write without end):
// a "QEMU" that writes 3 MiB to stderr before it runs the real one leaves
// at most the 1 MiB cap and a marker line on the host, and boots.
TEST_F(BootTest, QemuStderrIsCappedOnTheHost) {
  ScratchDir bin;
  std::string flooding = bin.path() + "/flooding-qemu";
  {
    std::ofstream f(flooding);
    f << "#!/bin/sh\nhead -c 3145728 /dev/zero | tr '\\000' x >&2\n"
         "exec qemu-system-x86_64 \"$@\"\n";
  }
  ASSERT_EQ(::chmod(flooding.c_str(), 0755), 0);
  hypervisor::qemu::QemuHypervisor hv({flooding, std::nullopt});
  MachineSpec s = minimalSpec(id("flood"), dir_);
  std::string stderr_path = s.run_dir + "/qemu.stderr";
  auto m = runBlocking(io_, node::bootMachine(hv, std::move(s), node::Clock::now() + 60s));
  ASSERT_TRUE(m.ok()) << m.error().message();
  struct stat st {};
  ASSERT_EQ(::stat(stderr_path.c_str(), &st), 0);
  EXPECT_LE(st.st_size, (1 << 20) + 64) << "QEMU's stderr grew past its cap on the host";
  EXPECT_GE(st.st_size, 1 << 20) << "the first MiB is kept";
  auto text = readFile(stderr_path, 2 << 20);
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, HasSubstr("[vessel: console log truncated here]"));
  stop(*m);
}

// A taken-over QEMU that streams its "state" far past its guest's RAM
// (hostile_qemu.cc): vesseld stops at RAM plus the margin, cancels the
// migration and keeps no file.
TEST_F(BootTest, StateStreamIsCappedAtGuestRamPlusAMargin) {
  hypervisor::qemu::QemuHypervisor hv({HOSTILE_QEMU_PATH, std::nullopt});
  MachineSpec s = minimalSpec(id("stream"), dir_);
  s.memory_mib = 16;
  const std::string state = dir_.path() + "/stream.state";
  auto vm = runBlocking(io_, hv.start(std::move(s), node::Clock::now() + 30s));
  ASSERT_TRUE(vm.ok()) << vm.error().message();
  auto saved = runBlocking(io_, (*vm)->saveState(state, false));
  ASSERT_FALSE(saved.ok()) << "a state stream of 256 MiB from a 16 MiB guest was kept";
  EXPECT_EQ(saved.error().code(), Code::kResourceExhausted) << saved.error().message();
  EXPECT_THAT(saved.error().message(), HasSubstr("state stream passed"));
  EXPECT_FALSE(std::filesystem::exists(state));
  EXPECT_FALSE(std::filesystem::exists(state + ".tmp"));
  EXPECT_TRUE(runBlocking(io_, (*vm)->stop()).ok());
}

// The probe as vesseld runs it: QEMU in its jail, in no host group. It
// reaches KVM through the jail's own /dev/kvm node, so the verdict names
// what the host's KVM did (here: it opens, but the guest does not boot),
// never the jail's "Permission denied", and is remembered as the host's.
TEST_F(BootTest, JailedAccelProbeReachesKvmAndNamesTheRealReason) {
  if (::geteuid() != 0) GTEST_SKIP() << "the jail needs root";
  if (!Fd::open("/dev/kvm", O_RDWR).ok()) GTEST_SKIP() << "no usable /dev/kvm on this host";
  auto cgroups = os::detectCgroups("/sys/fs/cgroup", "vessel-test");
  ASSERT_TRUE(cgroups.ok()) << cgroups.error().message();
  ScratchDir jail_dir;
  auto uids =
      os::UidPool::open({1879240000, 1879240099}, jail_dir.path() + "/leases", jail_dir.path());
  ASSERT_TRUE(uids.ok()) << uids.error().message();
  hypervisor::qemu::JailOptions jo;
  jo.jailer = {*uids, *cgroups, jail_dir.path() + "/jail", prefix_};
  jo.memfile_shim = "/unused-by-the-probe.so";  // it has no memory file
  jo.backing_roots = {dir_.path()};
  hypervisor::qemu::QemuHypervisor jailed({"qemu-system-x86_64", jo});
  ScratchDir cache;
  node::ProbeInputs in{testing::kernelPath(),
                       testing::minimalImage(),
                       "init=/sbin/vessel-agent",
                       dir_.path() + "/" + id("jprobe"),
                       cache.path(),
                       "test-qemu"};
  in.deadline = 5s;
  auto c = runBlocking(io_, node::chooseAccel(node::AccelMode::kAuto, jailed, in));
  for (const auto& d : os::Cgroup::dirsFor(jo.jailer.cgroups, "x"))
    ::rmdir(std::filesystem::path(d).parent_path().c_str());
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_THAT(c->reason, ::testing::Not(HasSubstr("Permission denied")));
  EXPECT_THAT(c->reason, ::testing::Not(HasSubstr("Could not access KVM")));
  std::error_code ec;
  EXPECT_FALSE(std::filesystem::is_empty(cache.path() + "/accel", ec))
      << "a verdict about the host is remembered: " << c->reason;
}

}  // namespace
}  // namespace vessel
