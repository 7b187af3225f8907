// The jail's pieces on the real kernel (root only): uid leases shared by two
// pools, a cgroup with its limits on whatever layout this host has, and a
// jailed process seen from the host (uid, capabilities, no_new_privs, mount
// namespace, cgroup, what its root holds), then everything undone.
#include "os/jail.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <filesystem>
#include <fstream>
#include <optional>

#include "base/child_process.h"
#include "base/fd.h"

namespace vessel::os {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Scratch {
  std::string path;
  Scratch() {
    char t[] = "/tmp/vessel-jail-test-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string statusField(pid_t pid, const std::string& key) {
  auto s = readFile("/proc/" + std::to_string(pid) + "/status", 1 << 16);
  if (!s.ok()) return "";
  auto at = s->find("\n" + key + ":");
  if (at == std::string::npos) return "";
  at += key.size() + 2;
  while (at < s->size() && ((*s)[at] == '\t' || (*s)[at] == ' ')) ++at;
  return s->substr(at, s->find('\n', at) - at);
}

TEST(UidRange, Parses) {
  auto r = parseUidRange("200000-265535");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, 200000u);
  EXPECT_EQ(r->last, 265535u);
  for (const char* bad : {"", "5", "0-10", "10-5", "1-2x", "a-b", "1-4294967295"})
    EXPECT_FALSE(parseUidRange(bad).ok()) << bad;
}

TEST(HostIds, ParsesAccountsAndGrantsAndRefusesBadLines) {
  auto pw =
      parseIdFile("root:x:0:0:root:/root:/bin/bash\n# comment\n\n+nis\nalice:x:1000:1000::/:/\n",
                  false, "/etc/passwd");
  ASSERT_TRUE(pw.ok()) << pw.error().message();
  ASSERT_EQ(pw->size(), 2u);
  EXPECT_EQ((*pw)[1].range.first, 1000u);
  EXPECT_EQ((*pw)[1].range.last, 1000u);
  EXPECT_EQ((*pw)[1].source, "/etc/passwd:5 (alice)");
  auto sub = parseIdFile("alice:100000:65536\nbob:165536:65536", true, "/etc/subuid");
  ASSERT_TRUE(sub.ok()) << sub.error().message();
  ASSERT_EQ(sub->size(), 2u);
  EXPECT_EQ((*sub)[1].range.first, 165536u);
  EXPECT_EQ((*sub)[1].range.last, 231071u);
  // A line that cannot be read is an error, not skipped: its range might
  // be the one that overlaps.
  for (const char* bad : {"alice:x", "alice:x:12a:0", "alice:x::0", "alice:x:99999999999:0"})
    EXPECT_FALSE(parseIdFile(bad, false, "p").ok()) << bad;
  for (const char* bad : {"alice:100000", "alice:100000:0", "alice:1:2:3", "alice:-1:5",
                          "alice:4294967295:2", "alice:100000:65536x", "alice::5"})
    EXPECT_FALSE(parseIdFile(bad, true, "s").ok()) << bad;
  EXPECT_FALSE(parseIdFile("a:1:" + std::string(5000, '1'), true, "s").ok()) << "overlong line";
  std::string many;
  for (int i = 0; i < 70000; ++i) many += "u:x:5:5::/:/\n";
  EXPECT_FALSE(parseIdFile(many, false, "p").ok()) << "more lines than the bound";
}

TEST(HostIds, RangeOverlappingAnAccountOrAGrantIsRefused) {
  Scratch dir;
  HostIdFiles f{dir.path + "/passwd", dir.path + "/group", dir.path + "/subuid",
                dir.path + "/subgid"};
  std::ofstream(f.passwd) << "root:x:0:0::/:/\nsvc:x:1879100000:100::/:/\n";
  std::ofstream(f.group) << "root:x:0:\n";
  // The grants useradd makes: 65536 ids per user from 100000 up to
  // SUB_UID_MAX (600100000).
  {
    std::ofstream sub(f.subuid), subg(f.subgid);
    for (uint64_t first = 100000, i = 0; first + 65535 <= 600100000; first += 65536, ++i) {
      sub << "user" << i << ":" << first << ":65536\n";
      subg << "user" << i << ":" << first << ":65536\n";
    }
  }
  // The old default overlapped the second user's grant.
  auto old_default = checkUidRangeFree({200000, 265535}, f);
  ASSERT_FALSE(old_default.ok());
  EXPECT_THAT(old_default.error().message(), HasSubstr(f.subuid + ":2 (user1)"));
  // The new one overlaps none of them; an account inside a range does.
  auto def = parseUidRange(kDefaultVmUidRange);
  ASSERT_TRUE(def.ok());
  f.passwd = dir.path + "/none";
  EXPECT_TRUE(checkUidRangeFree(*def, f).ok()) << checkUidRangeFree(*def, f).error().message();
  f.passwd = dir.path + "/passwd";
  auto account = checkUidRangeFree(*def, f);
  ASSERT_FALSE(account.ok());
  EXPECT_THAT(account.error().message(), HasSubstr("(svc)"));
  // Only the subgid file overlapping is enough (the uid is the gid too).
  f.passwd = dir.path + "/none";
  std::ofstream(f.subgid, std::ios::app) << "late:1879048192:1\n";
  EXPECT_FALSE(checkUidRangeFree(*def, f).ok());
  // A pool is not opened on such a range.
  EXPECT_FALSE(UidPool::open(*def, dir.path + "/leases", "/state", f).ok());
  // A file that cannot be read refuses the range too.
  std::ofstream(f.subgid) << "garbage\n";
  EXPECT_FALSE(checkUidRangeFree({1879300000, 1879300010}, f).ok());
}

TEST(UidPool, LeasesAreHostWide) {
  Scratch dir;
  auto a = UidPool::open({1879200000, 1879200002}, dir.path + "/leases", "/state/a");
  auto b = UidPool::open({1879200000, 1879200002}, dir.path + "/leases", "/state/b");
  ASSERT_TRUE(a.ok() && b.ok());
  auto u1 = (*a)->allocate("vm1");
  auto u2 = (*b)->allocate("vm2");
  auto u3 = (*a)->allocate("vm3");
  ASSERT_TRUE(u1.ok() && u2.ok() && u3.ok());
  EXPECT_NE(*u1, *u2);
  EXPECT_NE(*u2, *u3);
  EXPECT_NE(*u1, *u3);
  EXPECT_FALSE((*b)->allocate("vm4").ok()) << "the range is exhausted across both pools";
  (*a)->free(*u1);
  auto u4 = (*b)->allocate("vm4");
  ASSERT_TRUE(u4.ok());
  EXPECT_EQ(*u4, *u1);
  // A restarted vesseld (a new pool, same owner) claims its VM's lease;
  // sweep drops only leases no process runs as.
  auto a2 = UidPool::open({1879200000, 1879200002}, dir.path + "/leases", "/state/a");
  ASSERT_TRUE(a2.ok());
  EXPECT_TRUE((*a2)->claim(*u3, "vm3").ok());
  EXPECT_EQ((*a2)->sweep(), 0u) << "a claimed lease stays";
  auto a3 = UidPool::open({1879200000, 1879200002}, dir.path + "/leases", "/state/a");
  EXPECT_EQ((*a3)->sweep(), 1u) << "vm3's uid runs no process: its lease goes";
  EXPECT_FALSE(fs::exists(dir.path + "/leases/" + std::to_string(*u3)));
  EXPECT_TRUE(fs::exists(dir.path + "/leases/" + std::to_string(*u2))) << "b's lease is b's";
}

TEST(Cgroup, UnifiedLayoutWritesV2Knobs) {
  // A v2 hierarchy stood in by a plain directory: which files get what.
  Scratch root;
  CgroupConfig cfg{root.path, "vessel", true};
  auto cg = Cgroup::create(cfg, "vm-1", {512ull << 20, 200000, 130});
  ASSERT_TRUE(cg.ok()) << cg.error().message();
  std::string dir = root.path + "/vessel/vm-1";
  EXPECT_EQ(*readFile(dir + "/memory.max"), std::to_string(512ull << 20));
  EXPECT_EQ(*readFile(dir + "/cpu.max"), "200000 100000");
  EXPECT_EQ(*readFile(dir + "/pids.max"), "130");
  EXPECT_EQ(*readFile(root.path + "/vessel/cgroup.subtree_control"), "+memory +cpu +pids +io");
  EXPECT_THAT(cg->procsFiles(), ::testing::ElementsAre(dir + "/cgroup.procs"));
}

TEST(Cgroup, UnifiedLayoutWritesIoWeightAndLimits) {
  Scratch root;
  CgroupConfig cfg{root.path, "vessel", true};
  CgroupLimits l{512ull << 20, 200000, 130};
  l.io_weight = 100;
  l.io_max = {{254, 0, 1000, 2000, 30, 40}};
  auto cg = Cgroup::create(cfg, "vm-1", l);
  ASSERT_TRUE(cg.ok()) << cg.error().message();
  std::string dir = root.path + "/vessel/vm-1";
  EXPECT_EQ(*readFile(dir + "/io.weight"), "default 100");
  EXPECT_EQ(*readFile(dir + "/io.max"), "254:0 rbps=1000 wbps=2000 riops=30 wiops=40");
  EXPECT_EQ(*readFile(dir + "/memory.swap.max"), "0");
}

TEST(Cgroup, V1LayoutWritesBlkioAndCapsSwapWhereAccounted) {
  Scratch root;
  for (const char* h : {"memory", "cpu", "pids", "blkio"})
    fs::create_directories(root.path + "/" + h);
  CgroupConfig cfg{root.path, "vessel", false};
  CgroupLimits l{512ull << 20, 200000, 130};
  l.io_weight = 5000;  // v2's scale: BFQ's is 1-1000
  l.io_max = {{8, 0, 1000, 2000, 30, 40}};
  auto plain = Cgroup::create(cfg, "vm-1", l);
  ASSERT_TRUE(plain.ok()) << plain.error().message();
  std::string mem = root.path + "/memory/vessel/vm-1";
  EXPECT_FALSE(fs::exists(mem + "/memory.memsw.limit_in_bytes")) << "no swap accounting here";
  std::string blk = root.path + "/blkio/vessel/vm-1";
  EXPECT_EQ(*readFile(blk + "/blkio.bfq.weight"), "1000");
  EXPECT_EQ(*readFile(blk + "/blkio.throttle.read_bps_device"), "8:0 1000");
  EXPECT_EQ(*readFile(blk + "/blkio.throttle.write_bps_device"), "8:0 2000");
  EXPECT_EQ(*readFile(blk + "/blkio.throttle.read_iops_device"), "8:0 30");
  EXPECT_EQ(*readFile(blk + "/blkio.throttle.write_iops_device"), "8:0 40");
  EXPECT_EQ(plain->dirs().size(), 4u);
  // With swap accounting (the root has memsw knobs), memory+swap is
  // capped at the memory limit: no swap.
  std::ofstream(root.path + "/memory/memory.memsw.limit_in_bytes") << "9223372036854771712";
  auto accounted = Cgroup::create(cfg, "vm-2", l);
  ASSERT_TRUE(accounted.ok()) << accounted.error().message();
  EXPECT_EQ(*readFile(root.path + "/memory/vessel/vm-2/memory.memsw.limit_in_bytes"),
            std::to_string(512ull << 20));
}

class JailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    auto c = detectCgroups("/sys/fs/cgroup", "vessel-test");
    if (!c.ok()) GTEST_SKIP() << c.error().message();
    auto uids = UidPool::open({1879210000, 1879210099}, dir_.path + "/leases", dir_.path);
    ASSERT_TRUE(uids.ok());
    cfg_ = {*uids, *c, dir_.path + "/jail", "jt" + std::to_string(::getpid()) + "-"};
  }
  void TearDown() override {
    // The test's parent group (another run may still use it: then it stays).
    for (const auto& d : Cgroup::dirsFor(cfg_.cgroups, "x"))
      ::rmdir(fs::path(d).parent_path().c_str());
  }
  Scratch dir_;
  JailerConfig cfg_;
};

TEST_F(JailTest, RealCgroupGetsLimitsAndGoes) {
  CgroupLimits l{256ull << 20, 100000, 64};
  // I/O caps on the disk this test's files are on (none on tmpfs).
  auto disk = blockDeviceOf(dir_.path);
  ASSERT_TRUE(disk.ok()) << disk.error().message();
  if (*disk) l.io_max = {{(*disk)->first, (*disk)->second, 1 << 20, 2 << 20, 100, 200}};
  l.io_weight = 100;
  auto cg = Cgroup::create(cfg_.cgroups, cfg_.name_prefix + "cg", l);
  ASSERT_TRUE(cg.ok()) << cg.error().message();
  auto dirs = cg->dirs();
  const std::string& d = dirs[cfg_.cgroups.unified ? 0 : 2];
  EXPECT_EQ(*readFile(d + "/pids.max"), "64\n");
  if (*disk) {
    const std::string dev = std::to_string((*disk)->first) + ":" + std::to_string((*disk)->second);
    if (cfg_.cgroups.unified) {
      EXPECT_THAT(*readFile(dirs[0] + "/io.max"), HasSubstr(dev + " rbps=1048576 wbps=2097152"));
    } else if (cfg_.cgroups.v1_blkio) {
      EXPECT_EQ(*readFile(dirs[3] + "/blkio.throttle.write_bps_device"), dev + " 2097152\n");
      EXPECT_EQ(*readFile(dirs[3] + "/blkio.throttle.read_iops_device"), dev + " 100\n");
    }
  }
  if (!cfg_.cgroups.unified && fs::exists("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")) {
    EXPECT_EQ(*readFile(dirs[0] + "/memory.memsw.limit_in_bytes"),
              std::to_string(256ull << 20) + "\n");
  }
  ASSERT_TRUE(cg->remove().ok());
  for (const auto& x : dirs) EXPECT_FALSE(fs::exists(x)) << x;
}

// A group that still holds a process: removeAsync tries again on a timer,
// so the io thread that awaits it runs other work meanwhile - here the
// handler that ends the process - and the group goes once it is empty. A
// removal that slept between tries would hold the thread for its whole
// second of tries and fail with EBUSY before that handler could run.
TEST_F(JailTest, CgroupRemovalWaitsOnATimerNotOnTheThread) {
  auto cg = Cgroup::create(cfg_.cgroups, cfg_.name_prefix + "busy", {});
  ASSERT_TRUE(cg.ok()) << cg.error().message();
  auto dirs = cg->dirs();
  SpawnOptions so;
  so.argv = {"sleep", "60"};
  so.die_with_parent = true;
  auto child = ChildProcess::spawn(so);
  ASSERT_TRUE(child.ok()) << child.error().message();
  for (const auto& procs : cg->procsFiles()) {
    std::ofstream f(procs);
    f << child->pid() << std::flush;
    ASSERT_TRUE(f.good()) << procs;
  }
  auto first = cg->tryRemove();
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_FALSE(*first) << "a group with a process in it is busy";

  boost::asio::io_context io;
  std::optional<Status> removed;
  boost::asio::co_spawn(
      io, [&]() -> boost::asio::awaitable<void> { removed = co_await cg->removeAsync(); },
      boost::asio::detached);
  boost::asio::steady_timer end(io, std::chrono::milliseconds(50));
  bool ended_first = false;
  end.async_wait([&](boost::system::error_code) {
    ended_first = !removed.has_value();
    (void)child->signal(SIGKILL);
    (void)child->waitFor(std::chrono::seconds(5));
  });
  io.run();
  EXPECT_TRUE(ended_first) << "the removal held the io thread until it gave up";
  ASSERT_TRUE(removed.has_value());
  EXPECT_TRUE(removed->ok()) << removed->error().message();
  for (const auto& x : dirs) EXPECT_FALSE(fs::exists(x)) << x;
}

TEST_F(JailTest, ProcessSeesOnlyItsMountsAsItsUidWithoutCapabilities) {
  std::string own = dir_.path + "/own.img", other = dir_.path + "/other.img";
  std::string run = dir_.path + "/run";
  { std::ofstream(own) << "mine"; }
  { std::ofstream(other) << "secret"; }
  fs::create_directories(run);
  JailSpec spec;
  spec.id = "p1";
  spec.mounts = {{"/usr", false, false, true}, {own, true, false, false}, {run, true}};
  for (const char* top : {"/lib", "/lib64", "/bin"})
    if (fs::is_symlink(top)) spec.symlinks.push_back({top, fs::read_symlink(top).string()});
  spec.mounts.push_back({"/dev/null", true, true, false});
  spec.owned = {own, run};
  spec.limits = {64ull << 20, 100000, 16};
  auto jail = Jail::create(cfg_, spec);
  ASSERT_TRUE(jail.ok()) << jail.error().message();
  const uint32_t uid = (*jail)->uid();
  std::vector<std::string> cgdirs = (*jail)->cgroup().dirs();
  std::string jdir = (*jail)->dir();
  EXPECT_TRUE(fs::exists(cfg_.uids ? dir_.path + "/leases/" + std::to_string(uid) : ""));

  // The jailed shell reports what it can reach, then waits to be looked at.
  Pipe out = *Pipe::create();
  SpawnOptions so;
  so.argv = {"/bin/sh", "-c",
             "cat " + own + "; echo; cat " + other + " 2>&1; echo > " + own +
                 " && echo own-writable; ls / | tr '\\n' ' '; echo; exec sleep 60"};
  so.env = {"PATH=/usr/bin:/bin"};
  so.fds = {{out.write.get(), 1}};
  so.pre_exec = (*jail)->preExec();
  auto child = ChildProcess::spawn(so);
  ASSERT_TRUE(child.ok()) << child.error().message();
  out.write.reset();
  std::string text;
  char buf[512];
  while (std::count(text.begin(), text.end(), '\n') < 4) {
    ssize_t n = ::read(out.read.get(), buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  EXPECT_THAT(text, HasSubstr("mine"));
  EXPECT_THAT(text, HasSubstr("No such file")) << "another file is not in the jail";
  EXPECT_THAT(text, ::testing::Not(HasSubstr("secret")));
  EXPECT_THAT(text, HasSubstr("own-writable"));
  // Its root holds the mount points' top directories and nothing else.
  EXPECT_THAT(text, ::testing::Not(HasSubstr("etc")));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("root")));

  pid_t pid = child->pid();
  EXPECT_EQ(statusField(pid, "Uid"), std::to_string(uid) + "\t" + std::to_string(uid) + "\t" +
                                         std::to_string(uid) + "\t" + std::to_string(uid));
  EXPECT_EQ(statusField(pid, "CapEff"), "0000000000000000");
  EXPECT_EQ(statusField(pid, "CapPrm"), "0000000000000000");
  EXPECT_EQ(statusField(pid, "CapBnd"), "0000000000000000");
  EXPECT_EQ(statusField(pid, "NoNewPrivs"), "1");
  std::error_code ec;
  EXPECT_NE(fs::read_symlink("/proc/self/ns/mnt", ec),
            fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/mnt", ec));
  auto cg = readFile("/proc/" + std::to_string(pid) + "/cgroup");
  ASSERT_TRUE(cg.ok());
  EXPECT_THAT(*cg, HasSubstr("vessel-test/" + cfg_.name_prefix + "p1"));
  // The host's view is untouched: nothing is mounted on the jail dir here.
  EXPECT_TRUE(fs::is_empty(jdir));

  // Dead and undone: cgroup, jail dir, lease, the lent file back to root.
  (void)child->signal(SIGKILL);
  (void)child->waitFor(std::chrono::seconds(10));
  jail->reset();
  for (const auto& d : cgdirs) EXPECT_FALSE(fs::exists(d)) << d;
  EXPECT_FALSE(fs::exists(jdir));
  EXPECT_FALSE(fs::exists(dir_.path + "/leases/" + std::to_string(uid)));
  struct stat st {};
  ASSERT_EQ(::stat(own.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0644u) << "its mode is given back too";
}

}  // namespace
}  // namespace vessel::os
