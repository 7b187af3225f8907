// Confinement of the hypervisor process, seen from inside it (issue 13): a
// real vesseld runs two sandboxes; a probe process takes on everything one
// QEMU has - its uid and gid, its mount namespace (and so its root), its
// cgroups, no capabilities, no_new_privs - and tries to open what an escape
// from that QEMU would want: the store, the gateway's CA key, the other
// sandbox's disk, memory file and sockets, the host's own files. Then the
// QEMU is killed with SIGKILL and its kernel objects must be gone once its
// sandbox is.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <optional>

#include "base/child_process.h"
#include "base/fd.h"
#include "base/scope_exit.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// One QEMU as the host sees it.
struct Qemu {
  pid_t pid = 0;
  std::string cmdline, disk, run_dir, mem_file, kernel;
  uint32_t uid = 0;
  std::vector<std::string> cgroup_dirs;  // host paths of its cgroups
  std::string cgroup_name;               // the leaf's name (= its jail dir's)
};

std::string between(const std::string& s, const std::string& from, char to) {
  auto a = s.find(from);
  if (a == std::string::npos) return "";
  a += from.size();
  auto b = s.find_first_of(std::string(1, to) + " ", a);
  return s.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

Qemu inspect(pid_t pid) {
  Qemu q;
  q.pid = pid;
  q.cmdline = processCmdline(pid).value_or("");
  q.disk = between(q.cmdline, "file=", ',');
  q.run_dir = fs::path(between(q.cmdline, "-qmp unix:", ',')).parent_path().string();
  q.mem_file = between(q.cmdline, "mem-path=", ',');
  q.kernel = between(q.cmdline, "-kernel ", ' ');
  auto st = readFile("/proc/" + std::to_string(pid) + "/status", 1 << 16);
  if (st.ok()) {
    auto at = st->find("\nUid:\t");
    if (at != std::string::npos) q.uid = std::stoul(st->substr(at + 6));
  }
  // "4:memory:/vessel/NAME" (v1) or "0::/vessel/NAME" (v2).
  auto cg = readFile("/proc/" + std::to_string(pid) + "/cgroup", 1 << 16);
  bool v2 = fs::exists("/sys/fs/cgroup/cgroup.controllers");
  size_t start = 0;
  while (cg.ok() && start < cg->size()) {
    size_t end = cg->find('\n', start);
    std::string line = cg->substr(start, end - start);
    start = end == std::string::npos ? cg->size() : end + 1;
    auto c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    std::string ctrl = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
    if (path.find("/vessel/") != 0) continue;
    q.cgroup_name = fs::path(path).filename().string();
    std::string base = ctrl.empty() ? (v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified")
                                    : "/sys/fs/cgroup/" + ctrl;
    q.cgroup_dirs.push_back(base + path);
  }
  return q;
}

// Opens each path as `q` would (see the file comment); errno per path, 0
// when the open succeeded.
std::vector<int> probeAs(const Qemu& q, const std::vector<std::string>& paths, int flags) {
  std::vector<int> result(paths.size(), -1);
  auto mnt = Fd::open("/proc/" + std::to_string(q.pid) + "/ns/mnt", O_RDONLY);
  if (!mnt.ok()) return result;
  std::vector<std::string> procs;
  for (const auto& d : q.cgroup_dirs) procs.push_back(d + "/cgroup.procs");
  auto pipe = Pipe::create();
  if (!pipe.ok()) return result;
  pid_t child = ::fork();
  if (child == 0) {
    // The child of a multithreaded test: system calls only.
    std::string me = std::to_string(::getpid());
    for (const auto& p : procs) {
      int fd = ::open(p.c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, me.data(), me.size()) < 0) ::_exit(10);
      ::close(fd);
    }
    if (::setns(mnt->get(), CLONE_NEWNS) != 0 || ::chdir("/") != 0) ::_exit(11);
    if (::syscall(SYS_setgroups, 0, nullptr) != 0 ||
        ::syscall(SYS_setresgid, q.uid, q.uid, q.uid) != 0 ||
        ::syscall(SYS_setresuid, q.uid, q.uid, q.uid) != 0 ||
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
      ::_exit(12);
    for (const auto& p : paths) {
      int fd = ::open(p.c_str(), flags | O_CLOEXEC);
      int e = fd >= 0 ? 0 : errno;
      if (fd >= 0) ::close(fd);
      (void)!::write(pipe->write.get(), &e, sizeof e);
    }
    ::_exit(0);
  }
  pipe->write.reset();
  for (auto& r : result)
    if (::read(pipe->read.get(), &r, sizeof r) != sizeof r) break;
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the probe could not take on the QEMU's identity (status " << status << ")";
  return result;
}

// What a taken-over QEMU reaches beyond its files, tried from its network,
// IPC, PID and mount namespaces with its uid and cgroups: errno of each
// attempt (0: it got through).
struct Reach {
  int loopback_api = -1;  // vesseld's API on 127.0.0.1
  int loopback = -1;      // the test's own listener on 127.0.0.1
  int host_address = -1;  // a listener on the host's own address
  int outside = -1;       // a UDP connect to 192.0.2.1 (a route lookup; no packet is sent)
  int host_process = -1;  // kill(vesseld, 0)
  int sysv = -1;          // msgget of the test's queue
  int pid = -1;           // its pid in there
};

int connectTo(int type, const sockaddr_in& to) {
  int s = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  int e = ::connect(s, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0 ? 0 : errno;
  ::close(s);
  return e;
}

sockaddr_in inet(in_addr_t ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = ip;
  a.sin_port = htons(port);
  return a;
}

struct Targets {
  sockaddr_in api, loopback, outside;
  std::optional<sockaddr_in> host_address;
  pid_t vesseld = 0;
  key_t sysv_key = 0;
};

Reach reachAs(const Qemu& q, const Targets& t) {
  Reach r;
  std::vector<Fd> ns;
  for (const char* n : {"net", "ipc", "pid", "mnt"}) {
    auto fd = Fd::open("/proc/" + std::to_string(q.pid) + "/ns/" + n, O_RDONLY);
    if (!fd.ok()) return r;
    ns.push_back(std::move(*fd));
  }
  std::vector<std::string> procs;
  for (const auto& d : q.cgroup_dirs) procs.push_back(d + "/cgroup.procs");
  auto pipe = Pipe::create();
  if (!pipe.ok()) return r;
  pid_t child = ::fork();
  if (child == 0) {
    // The child of a multithreaded test: system calls only.
    std::string me = std::to_string(::getpid());
    for (const auto& p : procs) {
      int fd = ::open(p.c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, me.data(), me.size()) < 0) ::_exit(10);
      ::close(fd);
    }
    const int kinds[] = {CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNS};
    for (size_t i = 0; i < 4; ++i)
      if (::setns(ns[i].get(), kinds[i]) != 0) ::_exit(11);
    if (::chdir("/") != 0 || ::syscall(SYS_setgroups, 0, nullptr) != 0 ||
        ::syscall(SYS_setresgid, q.uid, q.uid, q.uid) != 0 ||
        ::syscall(SYS_setresuid, q.uid, q.uid, q.uid) != 0 ||
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
      ::_exit(12);
    // Only a child enters the PID namespace.
    pid_t inner = ::fork();
    if (inner == 0) {
      Reach in;
      in.loopback_api = connectTo(SOCK_STREAM, t.api);
      in.loopback = connectTo(SOCK_STREAM, t.loopback);
      in.host_address = t.host_address ? connectTo(SOCK_STREAM, *t.host_address) : -1;
      in.outside = connectTo(SOCK_DGRAM, t.outside);
      in.host_process = ::kill(t.vesseld, 0) == 0 ? 0 : errno;
      in.sysv = ::msgget(t.sysv_key, 0) >= 0 ? 0 : errno;
      in.pid = ::getpid();
      (void)!::write(pipe->write.get(), &in, sizeof in);
      ::_exit(0);
    }
    int st = 0;
    ::waitpid(inner, &st, 0);
    ::_exit(inner > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 13);
  }
  pipe->write.reset();
  if (::read(pipe->read.get(), &r, sizeof r) != sizeof r) r = Reach{};
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the probe could not take on the QEMU's namespaces (status " << status << ")";
  return r;
}

// An IPv4 address of this host that is not loopback.
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

// A listening socket on ip:0; its address.
std::optional<sockaddr_in> listenOn(Fd& fd, in_addr_t ip) {
  fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a = inet(ip, 0);
  socklen_t len = sizeof a;
  if (fd.get() < 0 || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 ||
      ::listen(fd.get(), 4) != 0 || ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len))
    return std::nullopt;
  return a;
}

std::string findFile(const std::string& root, const std::string& name) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::end(it); it.increment(ec))
    if (it->path().filename() == name) return it->path().string();
  return "";
}

class ConfinementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the jail needs root";
    // No warm pool: the two sandboxes' QEMUs are the only ones.
    d_ = std::make_unique<testing::Vesseld>(VESSELD_PATH,
                                            std::vector<std::string>{"--warm-pool", ""});
    d_->setContract(testing::apiContract());
    ASSERT_TRUE(d_->start()) << "vesseld did not come up; log:\n" << d_->log();
  }
  void TearDown() override {
    if (d_ && d_->running()) {
      auto e = d_->stop();
      EXPECT_TRUE(e.exited && e.code == 0) << e.describe() << "\n" << d_->log();
    }
    if (d_) EXPECT_THAT(testing::qemuProcessesUsing(d_->root()), ::testing::IsEmpty());
  }
  // This daemon's QEMUs by disk path.
  std::map<std::string, Qemu> qemus() {
    std::map<std::string, Qemu> m;
    for (int pid : d_->qemuPids()) {
      Qemu q = inspect(pid);
      m[q.disk] = q;
    }
    return m;
  }
  std::unique_ptr<testing::Vesseld> d_;
};

TEST_F(ConfinementTest, HypervisorProcessCannotReachStoreCaKeyOrOtherSandbox) {
  std::string a = d_->createSandbox(), b = d_->createSandbox();
  ASSERT_FALSE(a.empty() || b.empty()) << d_->log();
  auto qs = qemus();
  ASSERT_EQ(qs.size(), 2u) << "one QEMU per sandbox";
  Qemu qa = qs.begin()->second, qb = std::next(qs.begin())->second;
  ASSERT_FALSE(qa.disk.empty() || qb.disk.empty()) << qa.cmdline;

  // The host's view of the QEMU: its own uid, nothing privileged.
  EXPECT_GE(qa.uid, 200000u);
  EXPECT_NE(qa.uid, qb.uid) << "every VM has a uid of its own";
  auto status = readFile("/proc/" + std::to_string(qa.pid) + "/status", 1 << 16);
  ASSERT_TRUE(status.ok());
  EXPECT_THAT(*status, HasSubstr("CapEff:\t0000000000000000"));
  EXPECT_THAT(*status, HasSubstr("CapBnd:\t0000000000000000"));
  EXPECT_THAT(*status, HasSubstr("NoNewPrivs:\t1"));
  EXPECT_THAT(*status, HasSubstr("Seccomp:\t2")) << "QEMU's own -sandbox filter is on";
  EXPECT_FALSE(qa.cgroup_dirs.empty()) << "QEMU is in a cgroup of its own";
  auto own_cg = readFile("/proc/self/cgroup");
  EXPECT_THAT(*own_cg, ::testing::Not(HasSubstr(qa.cgroup_name)));

  std::string store = d_->stateDir() + "/vessel.db";
  std::string ca_key = findFile(d_->stateDir(), "ca.key");
  ASSERT_TRUE(fs::exists(store));
  ASSERT_FALSE(ca_key.empty()) << "the gateway's CA key is somewhere in the state dir";
  std::vector<std::string> forbidden = {
      store,
      ca_key,
      qb.disk,
      qb.run_dir + "/qmp.sock",
      qb.run_dir + "/agent.sock",
      fs::path(qb.disk).parent_path().string() + "/console.log",
      d_->stateDir() + "/dev-api-key",
      "/etc/shadow",
      "/proc/1/root",
      "/sys/fs/cgroup",
  };
  auto got = probeAs(qa, forbidden, O_RDONLY);
  for (size_t i = 0; i < forbidden.size(); ++i)
    EXPECT_TRUE(got[i] == ENOENT || got[i] == EACCES)
        << forbidden[i] << " opened from inside the QEMU's jail (errno " << got[i] << ")";

  // What it needs, it has: its own disk read-write, the kernel and the
  // template's memory file read-only (shared by every clone: not writable).
  auto own = probeAs(qa, {qa.disk, qa.kernel}, O_RDWR);
  EXPECT_EQ(own[0], 0) << "its own disk";
  EXPECT_TRUE(own[1] == EROFS || own[1] == EACCES) << "the kernel is read-only: " << own[1];
  auto ro = probeAs(qa, {qa.kernel, qa.run_dir + "/qmp.sock"}, O_RDONLY);
  EXPECT_EQ(ro[0], 0);
  if (!qa.mem_file.empty()) {
    auto mem = probeAs(qa, {qa.mem_file}, O_RDWR);
    EXPECT_TRUE(mem[0] == EROFS || mem[0] == EACCES)
        << "the template's memory must not be writable by a clone: " << mem[0];
  }
  // The node says what the guest-to-host boundary is.
  auto health = d_->call("GET", "/healthz", "", "");
  auto hj = boost::json::parse(health.body);
  const auto& iso = hj.at("isolation").as_object();
  EXPECT_TRUE(iso.at("jail").as_bool());
  if (!iso.at("boundary").as_bool())
    EXPECT_THAT(std::string(iso.at("warning").as_string()), HasSubstr("not an isolation boundary"));
  // And the sandbox still works.
  EXPECT_EQ(d_->sh(a, "echo alive"), "alive\n");
  EXPECT_EQ(d_->sh(b, "echo alive"), "alive\n");
}

// The QEMU taken over tries the network and the host's processes and IPC:
// its network namespace is empty (the API on the loopback, the host's
// address and any route out are not there), its PID namespace holds only
// it, its IPC namespace none of the host's objects. Each target is shown
// reachable from the host first, so what fails inside fails by the jail.
TEST_F(ConfinementTest, HypervisorProcessHasNoNetworkNoHostProcessesNoHostIpc) {
  std::string a = d_->createSandbox();
  ASSERT_FALSE(a.empty()) << d_->log();
  auto qs = qemus();
  ASSERT_EQ(qs.size(), 1u);
  Qemu q = qs.begin()->second;
  Fd lo_fd, host_fd;
  Targets t;
  t.api = inet(htonl(INADDR_LOOPBACK), d_->port());
  auto lo = listenOn(lo_fd, htonl(INADDR_LOOPBACK));
  ASSERT_TRUE(lo.has_value());
  t.loopback = *lo;
  if (auto ip = hostAddress()) t.host_address = listenOn(host_fd, *ip);
  t.outside = inet(0, 53);
  ::inet_pton(AF_INET, "192.0.2.1", &t.outside.sin_addr);
  t.vesseld = d_->pid();
  t.sysv_key = static_cast<key_t>(0x7e560000 | (::getpid() & 0xffff));
  int queue = ::msgget(t.sysv_key, IPC_CREAT | IPC_EXCL | 0666);
  ASSERT_GE(queue, 0) << strerror(errno);
  ScopeExit drop_queue([&] { ::msgctl(queue, IPC_RMID, nullptr); });
  ASSERT_EQ(connectTo(SOCK_STREAM, t.api), 0);
  ASSERT_EQ(connectTo(SOCK_STREAM, t.loopback), 0);
  if (t.host_address) {
    ASSERT_EQ(connectTo(SOCK_STREAM, *t.host_address), 0);
  }
  ASSERT_EQ(connectTo(SOCK_DGRAM, t.outside), 0) << "this host has a route out";

  Reach r = reachAs(q, t);
  EXPECT_EQ(r.loopback_api, ENETUNREACH) << "the QEMU reached vesseld's API";
  EXPECT_EQ(r.loopback, ENETUNREACH) << "the QEMU reached the host's loopback";
  if (t.host_address) {
    EXPECT_EQ(r.host_address, ENETUNREACH) << "the host's own address";
  }
  EXPECT_EQ(r.outside, ENETUNREACH) << "the QEMU has a route out";
  EXPECT_EQ(r.host_process, ESRCH) << "the QEMU sees vesseld's process";
  EXPECT_EQ(r.sysv, ENOENT) << "the QEMU opened the host's SysV queue";
  EXPECT_GT(r.pid, 1) << "a process joining its PID namespace gets a pid of that namespace";
  // From the host: QEMU is PID 1 of its namespace, which holds nothing else.
  auto status = readFile("/proc/" + std::to_string(q.pid) + "/status", 1 << 16);
  ASSERT_TRUE(status.ok());
  EXPECT_THAT(*status, HasSubstr("NSpid:\t" + std::to_string(q.pid) + "\t1\n"));
  // The guest's network still works through its tap (an fd from before).
  EXPECT_EQ(d_->sh(a, "echo alive"), "alive\n");
}

TEST_F(ConfinementTest, KilledQemuLeavesNoCgroupJailOrUidLease) {
  std::string a = d_->createSandbox();
  ASSERT_FALSE(a.empty()) << d_->log();
  auto qs = qemus();
  ASSERT_EQ(qs.size(), 1u);
  Qemu q = qs.begin()->second;
  ASSERT_FALSE(q.cgroup_dirs.empty());
  std::string jail_dir = d_->stateDir() + "/jail/" + q.cgroup_name;
  std::string lease = "/run/vessel/uids/" + std::to_string(q.uid);
  for (const auto& d : q.cgroup_dirs) EXPECT_TRUE(fs::exists(d)) << d;
  EXPECT_TRUE(fs::exists(jail_dir));
  EXPECT_TRUE(fs::exists(lease));

  ASSERT_EQ(::kill(q.pid, SIGKILL), 0);
  // The sandbox goes (the VM is reaped); with it every kernel object.
  EXPECT_TRUE(d_->deleteSandbox(a)) << d_->log();
  for (const auto& d : q.cgroup_dirs) EXPECT_FALSE(fs::exists(d)) << d;
  EXPECT_FALSE(fs::exists(jail_dir));
  EXPECT_FALSE(fs::exists(lease));
  EXPECT_FALSE(fs::exists(q.run_dir));
  // The node goes on: a new sandbox gets a jail of its own.
  std::string b = d_->createSandbox();
  ASSERT_FALSE(b.empty()) << d_->log();
  EXPECT_EQ(d_->sh(b, "echo alive"), "alive\n");
}

TEST(RequireKvmTest, RefusesToStartUnderTcg) {
  if (::geteuid() != 0) GTEST_SKIP() << "vesseld needs root";
  testing::Vesseld d(VESSELD_PATH, {"--require-kvm"});
  EXPECT_FALSE(d.start());
  // The harness asks for TCG: refused by the flags or, under auto, by the probe.
  EXPECT_THAT(d.log(), HasSubstr("--require-kvm"));
  EXPECT_THAT(testing::qemuProcessesUsing(d.root()), ::testing::IsEmpty());
}

}  // namespace
}  // namespace vessel
