// The jail as a taken-over hypervisor would find it (root only): a process
// spawned exactly as QEMU is (Jail::spawn), probing from inside after the
// jail is entered, before it execs. It reaches /dev/kvm through a node of
// its own uid and nothing else gains by it; it has no network (not the
// host's loopback, not the host's other addresses, no route out), no SysV
// IPC of the host, sees no host process, and is PID 1 of a namespace that
// dies with it, so killing it leaves nothing.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <linux/kvm.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/msg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <optional>

#include "base/child_process.h"
#include "base/fd.h"
#include "os/jail.h"

namespace vessel::os {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Scratch {
  std::string path;
  Scratch() {
    char t[] = "/tmp/vessel-jailns-test-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A TCP listener on `ip` (port 0): what the probe must not reach.
struct Listener {
  Fd fd;
  sockaddr_in addr{};
  static std::optional<Listener> open(in_addr_t ip) {
    Listener l;
    l.fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    l.addr.sin_family = AF_INET;
    l.addr.sin_addr.s_addr = ip;
    socklen_t len = sizeof l.addr;
    if (l.fd.get() < 0 || ::bind(l.fd.get(), reinterpret_cast<sockaddr*>(&l.addr), len) != 0 ||
        ::listen(l.fd.get(), 4) != 0 ||
        ::getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&l.addr), &len) != 0)
      return std::nullopt;
    return l;
  }
};

// An IPv4 address of this host that is not loopback (none: nullopt).
std::optional<in_addr_t> hostAddress() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return std::nullopt;
  std::optional<in_addr_t> out;
  for (ifaddrs* i = all; i && !out; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
        !(i->ifa_flags & IFF_LOOPBACK))
      out = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
  ::freeifaddrs(all);
  return out;
}

// errno of a connect (0: it connected). Runs in the spawned child.
int tryConnect(int type, const sockaddr_in& to) {
  int s = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  int r = ::connect(s, reinterpret_cast<const sockaddr*>(&to), sizeof to);
  int e = r == 0 ? 0 : errno;
  ::close(s);
  return e;
}

class JailNamespacesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    auto c = detectCgroups("/sys/fs/cgroup", "vessel-test");
    if (!c.ok()) GTEST_SKIP() << c.error().message();
    auto uids = UidPool::open({1879230000, 1879230099}, dir_.path + "/leases", dir_.path);
    ASSERT_TRUE(uids.ok()) << uids.error().message();
    cfg_ = {*uids, *c, dir_.path + "/jail", "jn" + std::to_string(::getpid()) + "-"};
  }
  void TearDown() override {
    for (const auto& d : Cgroup::dirsFor(cfg_.cgroups, "x"))
      ::rmdir(fs::path(d).parent_path().c_str());
  }
  // What QEMU's jail holds of the system: /usr, the merged-/usr links, /dev/null.
  JailSpec systemSpec(const std::string& id) {
    JailSpec spec;
    spec.id = id;
    spec.mounts = {{"/usr", false, false, true}, {"/dev/null", true, true, false}};
    for (const char* top : {"/lib", "/lib64", "/bin"})
      if (fs::is_symlink(top)) spec.symlinks.push_back({top, fs::read_symlink(top).string()});
    spec.limits = {64ull << 20, 100000, 16};
    return spec;
  }
  Scratch dir_;
  JailerConfig cfg_;
};

// Results the probe writes, in order.
enum Probe {
  kPid,          // getpid() inside
  kLoopback,     // connect to the test's 127.0.0.1 listener
  kHostAddress,  // connect to a listener on the host's own address
  kOutside,      // a UDP connect to 192.0.2.1 (a route lookup; no packet is sent)
  kHostProcess,  // kill(this test's pid, 0)
  kSysvQueue,    // msgget of the test's queue
  kProbeResults,
};

TEST_F(JailNamespacesTest, HoldsNoNetworkNoHostIpcAndSeesNoHostProcess) {
  auto lo = Listener::open(htonl(INADDR_LOOPBACK));
  ASSERT_TRUE(lo.has_value());
  auto host_ip = hostAddress();
  std::optional<Listener> on_host;
  if (host_ip) on_host = Listener::open(*host_ip);
  sockaddr_in outside{};
  outside.sin_family = AF_INET;
  outside.sin_port = htons(53);
  ::inet_pton(AF_INET, "192.0.2.1", &outside.sin_addr);
  // A queue anyone on the host may open.
  const key_t key = static_cast<key_t>(0x7e550000 | (::getpid() & 0xffff));
  int q = ::msgget(key, IPC_CREAT | IPC_EXCL | 0666);
  ASSERT_GE(q, 0) << strerror(errno);
  struct QueueGone {
    int q;
    ~QueueGone() { ::msgctl(q, IPC_RMID, nullptr); }
  } queue_gone{q};
  // Each check is shown possible from the host first: what fails inside
  // fails because of the jail.
  ASSERT_EQ(tryConnect(SOCK_STREAM, lo->addr), 0);
  if (on_host) {
    ASSERT_EQ(tryConnect(SOCK_STREAM, on_host->addr), 0);
  }
  ASSERT_EQ(::msgget(key, 0), q);

  auto jail = Jail::create(cfg_, systemSpec("ns"));
  ASSERT_TRUE(jail.ok()) << jail.error().message();
  Pipe out = *Pipe::create();
  const pid_t me = ::getpid();
  const int w = out.write.get();
  const sockaddr_in lo_addr = lo->addr;
  const std::optional<sockaddr_in> host_addr =
      on_host ? std::optional<sockaddr_in>(on_host->addr) : std::nullopt;
  SpawnOptions so;
  so.argv = {"/bin/sh", "-c", "sleep 60 & exec sleep 60"};
  so.env = {"PATH=/usr/bin:/bin"};
  so.pre_exec = [=]() -> int {
    std::array<int, kProbeResults> r{};
    r[kPid] = ::getpid();
    r[kLoopback] = tryConnect(SOCK_STREAM, lo_addr);
    r[kHostAddress] = host_addr ? tryConnect(SOCK_STREAM, *host_addr) : -1;
    r[kOutside] = tryConnect(SOCK_DGRAM, outside);
    r[kHostProcess] = ::kill(me, 0) == 0 ? 0 : errno;
    r[kSysvQueue] = ::msgget(key, 0) >= 0 ? 0 : errno;
    (void)!::write(w, r.data(), sizeof r);
    return 0;
  };
  auto child = (*jail)->spawn(so);
  ASSERT_TRUE(child.ok()) << child.error().message();
  out.write.reset();
  std::array<int, kProbeResults> r{};
  ASSERT_EQ(::read(out.read.get(), r.data(), sizeof r), static_cast<ssize_t>(sizeof r));

  EXPECT_EQ(r[kPid], 1) << "PID 1 of a namespace of its own";
  EXPECT_NE(r[kLoopback], 0) << "reached the host's loopback";
  EXPECT_EQ(r[kLoopback], ENETUNREACH);
  if (host_addr) {
    EXPECT_EQ(r[kHostAddress], ENETUNREACH) << "reached the host's own address";
  }
  EXPECT_EQ(r[kOutside], ENETUNREACH) << "has a route out";
  EXPECT_EQ(r[kHostProcess], ESRCH) << "sees this test's process";
  EXPECT_EQ(r[kSysvQueue], ENOENT) << "opened the host's SysV queue";

  // From the host: namespaces of its own, and the pid the host knows.
  const pid_t pid = child->pid();
  EXPECT_GT(pid, 1);
  for (const char* ns : {"net", "ipc", "pid", "uts", "mnt"}) {
    std::error_code ec;
    EXPECT_NE(fs::read_symlink(std::string("/proc/self/ns/") + ns, ec),
              fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/" + ns, ec))
        << ns;
  }
  // The shell forked a sleep inside; killing PID 1 takes it along (a
  // process outside a PID namespace would be re-parented and live on).
  std::string pidns = fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/pid").string();
  auto inNamespace = [&] {
    std::vector<pid_t> in;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
      std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      if (fs::read_symlink(e.path() / "ns/pid", ec).string() == pidns && !ec)
        in.push_back(std::stoi(name));
    }
    return in;
  };
  // The inner sleep is started by the shell: wait (bounded) until it is there.
  for (int i = 0; i < 500 && inNamespace().size() < 2; ++i) ::usleep(10000);
  ASSERT_EQ(inNamespace().size(), 2u) << "the shell and its background sleep";
  ASSERT_TRUE(child->signal(SIGKILL).ok());
  auto st = child->waitFor(std::chrono::seconds(10));
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->exited);
  EXPECT_EQ(st->signal, SIGKILL) << "its pidfd and exit status are the usual ones";
  for (int i = 0; i < 500 && !inNamespace().empty(); ++i) ::usleep(10000);
  EXPECT_THAT(inNamespace(), ::testing::IsEmpty()) << "a process of the jail outlived it";
  // The spawning thread's next child is back in the host's PID namespace.
  SpawnOptions plain;
  plain.argv = {"true"};
  auto next = ChildProcess::spawn(plain);
  ASSERT_TRUE(next.ok());
  std::error_code ec;
  EXPECT_EQ(fs::read_symlink("/proc/" + std::to_string(next->pid()) + "/ns/pid", ec),
            fs::read_symlink("/proc/self/ns/pid", ec));
  (void)next->waitFor(std::chrono::seconds(10));
}

// What the jail gives for KVM: a node of the VM's own; the host's stays as
// it is (here root:root 0600, on most hosts root:kvm 0660 - either way a VM
// uid, in no group, could not open it).
TEST_F(JailNamespacesTest, KvmNodeOfItsOwnOpensAndAnswers) {
  struct stat host {};
  if (::stat("/dev/kvm", &host) != 0) GTEST_SKIP() << "no /dev/kvm on this host";
  JailSpec spec = systemSpec("kvm");
  spec.devices = {{"/dev/kvm"}};
  auto jail = Jail::create(cfg_, spec);
  ASSERT_TRUE(jail.ok()) << jail.error().message();
  const uint32_t uid = (*jail)->uid();
  Pipe out = *Pipe::create();
  const int w = out.write.get();
  SpawnOptions so;
  so.argv = {"true"};
  so.env = {"PATH=/usr/bin:/bin"};
  so.pre_exec = [w]() -> int {
    // open errno, KVM_GET_API_VERSION, the node's owner and mode, and
    // whether another node can be made next to it (its own or the host's).
    int r[6] = {0, -1, -1, 0, 0, 0};
    int fd = ::open("/dev/kvm", O_RDWR | O_CLOEXEC);
    r[0] = fd >= 0 ? 0 : errno;
    if (fd >= 0) {
      r[1] = ::ioctl(fd, KVM_GET_API_VERSION, 0);
      ::close(fd);
    }
    struct stat st {};
    if (::stat("/dev/kvm", &st) == 0) {
      r[2] = static_cast<int>(st.st_uid);
      r[3] = static_cast<int>(st.st_mode);
    }
    r[4] = ::mknod("/dev/sda", S_IFBLK | 0600, makedev(8, 0)) == 0 ? 0 : errno;
    r[5] = ::open("/dev/null", O_RDWR | O_CLOEXEC) >= 0 ? 0 : errno;
    (void)!::write(w, r, sizeof r);
    return 0;
  };
  auto child = (*jail)->spawn(so);
  ASSERT_TRUE(child.ok()) << child.error().message();
  out.write.reset();
  int r[6];
  ASSERT_EQ(::read(out.read.get(), r, sizeof r), static_cast<ssize_t>(sizeof r));
  auto st = child->waitFor(std::chrono::seconds(10));
  ASSERT_TRUE(st.ok() && st->success());
  EXPECT_EQ(r[0], 0) << "open /dev/kvm in the jail: " << strerror(r[0]);
  EXPECT_EQ(r[1], KVM_API_VERSION) << "KVM_GET_API_VERSION";
  EXPECT_EQ(static_cast<uint32_t>(r[2]), uid) << "the node is the VM's";
  EXPECT_TRUE(S_ISCHR(r[3]));
  EXPECT_EQ(r[3] & 07777, 0600) << "and no one else's";
  EXPECT_NE(r[4], 0) << "it could make another device node";
  EXPECT_EQ(r[5], 0) << "/dev/null (bound into the device tmpfs) still opens";
  struct stat after {};
  ASSERT_EQ(::stat("/dev/kvm", &after), 0);
  EXPECT_EQ(after.st_uid, host.st_uid) << "the host's node is untouched";
  EXPECT_EQ(after.st_gid, host.st_gid);
  EXPECT_EQ(after.st_mode, host.st_mode);
}

// QEMU itself, jailed as vesseld jails it: it opens KVM and says so.
TEST_F(JailNamespacesTest, JailedQemuRunsWithKvm) {
  if (::access("/dev/kvm", F_OK) != 0) GTEST_SKIP() << "no /dev/kvm on this host";
  if (::access("/usr/bin/qemu-system-x86_64", X_OK) != 0) GTEST_SKIP() << "no QEMU";
  JailSpec spec = systemSpec("qemu");
  spec.devices = {{"/dev/kvm"}};
  spec.limits = {512ull << 20, 100000, 128};
  auto jail = Jail::create(cfg_, spec);
  ASSERT_TRUE(jail.ok()) << jail.error().message();
  Pipe in = *Pipe::create(), out = *Pipe::create();
  SpawnOptions so;
  so.argv = {"qemu-system-x86_64", "-M",   "none", "-accel", "kvm",  "-nodefaults",
             "-display",           "none", "-S",   "-qmp",   "stdio"};
  so.env = {"PATH=/usr/bin:/bin"};
  so.fds = {{in.read.get(), 0}, {out.write.get(), 1}, {out.write.get(), 2}};
  auto child = (*jail)->spawn(so);
  ASSERT_TRUE(child.ok()) << child.error().message();
  in.read.reset();
  out.write.reset();
  std::string cmds =
      "{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"query-kvm\"}\n{\"execute\":\"quit\"}\n";
  ASSERT_EQ(::write(in.write.get(), cmds.data(), cmds.size()), static_cast<ssize_t>(cmds.size()));
  std::string text;
  char buf[4096];
  for (ssize_t n; text.size() < (1 << 16) && (n = ::read(out.read.get(), buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<size_t>(n));
  (void)child->waitFor(std::chrono::seconds(20));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("Could not access KVM"))) << text;
  EXPECT_THAT(text, HasSubstr("\"enabled\": true")) << text;
}

}  // namespace
}  // namespace vessel::os
