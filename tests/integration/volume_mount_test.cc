// A volume mount's whole path without a VM (issue 27): the real agent on
// the host (HostAgent) mounts FUSE at a directory, its session relayed by
// AgentClient::mountVolume and VolumeStream::relay to a real
// vessel-volume-server on a real volume (VolumeHost: ext4 image, loop
// mount). The guest-kernel half is the host's kernel here; the guest tests
// (volumes_guest_test.cc) do the same through a sandbox. Root and
// /dev/fuse only. Two mounts are two sandboxes: their locks conflict and
// their xattrs are shared. And the server alone against hostile FUSE
// requests: names that climb, node ids it never gave, a symlink out of the
// volume, xattr names beyond user.*.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "agentclient/testing/agent_harness.h"
#include "os/jail.h"
#include "volumes/file_server.h"
#include "volumes/volume_host.h"

namespace vessel {
namespace {

namespace fs = std::filesystem;
namespace asio = boost::asio;

// Just above the default VM range: no VM of a concurrent test shares it.
constexpr const char* kTestUids = "1879113728-1879113791";

std::string readAll(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool writeAll(const std::string& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
  out.flush();
  return static_cast<bool>(out);
}

// /proc/<pid>/status's value for `key` ("Uid", "CapEff", ...).
std::string statusOf(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) {
      auto v = line.substr(key.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return "";
}

class VolumeMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0)
      GTEST_SKIP() << "needs root and /dev/fuse";
    char tmpl[] = "/tmp/vessel-volmount-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto host = volumes::VolumeHost::open({dir_ + "/volumes"});
    ASSERT_TRUE(host.ok()) << host.error().message();
    host_ = std::move(*host);
    ASSERT_TRUE(host_->create("vol1", 16).ok());
    auto range = os::parseUidRange(kTestUids);
    ASSERT_TRUE(range.ok());
    fs::create_directories(dir_ + "/leases");
    auto uids = os::UidPool::open(*range, dir_ + "/leases", dir_);
    ASSERT_TRUE(uids.ok()) << uids.error().message();
    server_opts_ = {VESSEL_VOLUME_SERVER, *uids};
  }

  void TearDown() override {
    if (io_thread_.joinable()) {
      // Unmount in each "guest" (its agent), then wait for the relay to
      // end and stop its server, all on the client's thread.
      for (auto& m : mounts_) {
        asio::co_spawn(
            io_,
            [s = m->stream]() -> asio::awaitable<void> {
              s->close();
              co_return;
            },
            asio::use_future)
            .wait();
        EXPECT_EQ(m->done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
      }
      guard_.reset();
      io_.stop();
      io_thread_.join();
    }
    for (auto& m : mounts_) (void)::umount2(m->path.c_str(), MNT_DETACH);
    mounts_.clear();
    agents_.clear();
    host_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  struct Mounted {
    std::shared_ptr<agentclient::VolumeStream> stream;
    std::unique_ptr<volumes::FileServer> server;
    std::string path;
    pid_t server_pid = 0;
    uint32_t server_uid = 0;
    std::future<void> done;  // the relay ended and the server stopped
  };

  // A new agent (a "sandbox") mounting volume `id` at <dir>/<name>, its
  // session relayed to a new server. Before serve().
  Mounted* mount(const std::string& id, const std::string& name, bool read_only) {
    auto agent = agentclient::testing::HostAgent::start(io_, VESSEL_AGENT_BINARY);
    EXPECT_TRUE(agent.ok()) << agent.error().message();
    if (!agent.ok()) return nullptr;
    auto client = (*agent)->client();
    agents_.push_back(std::move(*agent));
    auto root = host_->root(id);
    EXPECT_TRUE(root.ok());
    auto server = volumes::FileServer::start(server_opts_, *root, read_only, name);
    EXPECT_TRUE(server.ok()) << server.error().message();
    if (!server.ok()) return nullptr;
    auto m = std::make_shared<Mounted>();
    m->path = dir_ + "/" + name;
    m->server = std::move(*server);
    m->server_pid = m->server->process().pid();
    m->server_uid = m->server->uid();
    auto stream = agentclient::testing::runFor(io_, client->mountVolume(m->path, read_only));
    EXPECT_TRUE(stream.ok()) << stream.error().message();
    if (!stream.ok()) return nullptr;
    m->stream = std::move(*stream);
    auto done = std::make_shared<std::promise<void>>();
    m->done = done->get_future();
    asio::co_spawn(
        io_,
        [m, done]() -> asio::awaitable<void> {
          (void)co_await m->stream->relay(m->server->socket().get());
          m->stream->close();
          m->server.reset();
          done->set_value();
        },
        asio::detached);
    mounts_.push_back(m);
    return m.get();
  }

  // The mounts are served from here on (the client's thread runs).
  void serve() {
    guard_.emplace(io_.get_executor());
    io_.restart();
    io_thread_ = std::thread([this] { io_.run(); });
  }

  std::string dir_;
  std::unique_ptr<volumes::VolumeHost> host_;
  volumes::FileServerOptions server_opts_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  std::thread io_thread_;
  std::vector<std::unique_ptr<agentclient::testing::HostAgent>> agents_;
  std::vector<std::shared_ptr<Mounted>> mounts_;
};

TEST_F(VolumeMountTest, WritesInOneMountAreReadInAnotherAndOnTheHost) {
  Mounted* a = mount("vol1", "a", false);
  Mounted* b = mount("vol1", "b", false);
  ASSERT_TRUE(a && b);
  serve();
  ASSERT_TRUE(writeAll(a->path + "/from-a.txt", "written through a\n"));
  ASSERT_TRUE(writeAll(b->path + "/from-b.txt", "written through b\n"));
  EXPECT_EQ(readAll(b->path + "/from-a.txt"), "written through a\n");
  EXPECT_EQ(readAll(a->path + "/from-b.txt"), "written through b\n");
  // On the volume itself, with the writer's owner (root here).
  auto root = *host_->root("vol1");
  EXPECT_EQ(readAll(root + "/from-a.txt"), "written through a\n");
  struct stat st;
  ASSERT_EQ(::stat((root + "/from-a.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  // Directories, renames, modes, owners, symlinks as text, hard links.
  ASSERT_EQ(::mkdir((a->path + "/d").c_str(), 0750), 0) << std::strerror(errno);
  ASSERT_EQ(::rename((a->path + "/from-a.txt").c_str(), (a->path + "/d/moved").c_str()), 0);
  ASSERT_EQ(::chown((a->path + "/d/moved").c_str(), 1234, 5678), 0) << std::strerror(errno);
  ASSERT_EQ(::chmod((a->path + "/d/moved").c_str(), 0600), 0);
  ASSERT_EQ(::stat((root + "/d/moved").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 5678u);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::symlink("/etc/passwd", (a->path + "/link").c_str()), 0);
  EXPECT_EQ(fs::read_symlink(root + "/link"), "/etc/passwd");
  ASSERT_EQ(::link((a->path + "/d/moved").c_str(), (a->path + "/hard").c_str()), 0)
      << std::strerror(errno);
  EXPECT_EQ(readAll(b->path + "/hard"), "written through a\n");
  // A large file, in many 128 KiB requests, both ways.
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4096);
  ASSERT_TRUE(writeAll(a->path + "/big", big));
  EXPECT_EQ(readAll(b->path + "/big"), big);
  size_t entries = 0;
  for (auto& e : fs::directory_iterator(b->path)) entries += !e.path().empty();
  EXPECT_EQ(entries, 6u);  // lost+found from-b.txt d link hard big
  EXPECT_EQ(::unlink((b->path + "/big").c_str()), 0);
  EXPECT_FALSE(fs::exists(root + "/big"));
}

TEST_F(VolumeMountTest, ReadOnlyMountRefusesWrites) {
  ASSERT_TRUE(writeAll(*host_->root("vol1") + "/seed", "seed"));
  Mounted* ro = mount("vol1", "ro", true);
  ASSERT_TRUE(ro);
  serve();
  EXPECT_EQ(readAll(ro->path + "/seed"), "seed");
  int fd = ::open((ro->path + "/new").c_str(), O_WRONLY | O_CREAT, 0644);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_NE(::unlink((ro->path + "/seed").c_str()), 0);
  EXPECT_EQ(errno, EROFS);
  EXPECT_TRUE(fs::exists(*host_->root("vol1") + "/seed"));
}

TEST_F(VolumeMountTest, FullVolumeIsEnospc) {
  Mounted* a = mount("vol1", "a", false);
  ASSERT_TRUE(a);
  serve();
  int fd = ::open((a->path + "/fill").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  std::string chunk(1 << 20, 'x');
  int err = 0;
  for (int i = 0; i < 64 && !err; ++i)  // 64 MiB into a 16 MiB volume
    if (::write(fd, chunk.data(), chunk.size()) < 0) err = errno;
  if (!err && ::fsync(fd) != 0) err = errno;
  ::close(fd);
  EXPECT_EQ(err, ENOSPC);
}

TEST_F(VolumeMountTest, ServerIsConfined) {
  Mounted* a = mount("vol1", "a", false);
  ASSERT_TRUE(a);
  serve();
  ASSERT_TRUE(writeAll(a->path + "/x", "x"));  // served: confined by now
  pid_t pid = a->server_pid;
  std::string uid = std::to_string(a->server_uid);
  EXPECT_EQ(statusOf(pid, "Uid"), uid + "\t" + uid + "\t" + uid + "\t" + uid);
  // CAP_CHOWN (0), CAP_DAC_OVERRIDE (1), CAP_FOWNER (3), CAP_FSETID (4).
  EXPECT_EQ(statusOf(pid, "CapEff"), "000000000000001b");
  EXPECT_EQ(statusOf(pid, "CapBnd"), "0000000000000000");
  EXPECT_EQ(statusOf(pid, "NoNewPrivs"), "1");
  EXPECT_EQ(statusOf(pid, "Seccomp"), "2");
  EXPECT_EQ(fs::read_symlink("/proc/" + std::to_string(pid) + "/root"), *host_->root("vol1"));
  EXPECT_NE(fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/net"),
            fs::read_symlink("/proc/self/ns/net"));
}

// --- The server alone, spoken to as a hostile guest kernel would ---------

class RawFuse {
 public:
  explicit RawFuse(int fd) : fd_(fd) {}
  // Sends one request (header + body) and returns the answer's error and body.
  std::pair<int, std::string> call(uint32_t opcode, uint64_t node, const std::string& body) {
    fuse_in_header h{};
    h.len = static_cast<uint32_t>(sizeof h + body.size());
    h.opcode = opcode;
    h.unique = ++unique_;
    h.nodeid = node;
    std::string msg(reinterpret_cast<const char*>(&h), sizeof h);
    msg += body;
    if (::send(fd_, msg.data(), msg.size(), 0) < 0) return {-999, ""};
    std::string buf(1 << 20, '\0');
    ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
    if (n < static_cast<ssize_t>(sizeof(fuse_out_header))) return {-998, ""};
    fuse_out_header o;
    std::memcpy(&o, buf.data(), sizeof o);
    return {o.error, buf.substr(sizeof o, static_cast<size_t>(n) - sizeof o)};
  }
  void init() {
    fuse_init_in in{};
    in.major = FUSE_KERNEL_VERSION;
    in.minor = FUSE_KERNEL_MINOR_VERSION;
    in.max_readahead = 1 << 20;
    auto [err, body] = call(FUSE_INIT, 0, std::string(reinterpret_cast<char*>(&in), sizeof in));
    ASSERT_EQ(err, 0);
    fuse_init_out out{};
    std::memcpy(&out, body.data(), std::min(body.size(), sizeof out));
    max_write = out.max_write;
  }
  uint32_t max_write = 0;

 private:
  int fd_;
  uint64_t unique_ = 0;
};

std::string name(const char* s) { return std::string(s, std::strlen(s) + 1); }

TEST_F(VolumeMountTest, ServerRefusesWhatNoKernelWouldSend) {
  auto root = *host_->root("vol1");
  ASSERT_EQ(::symlink("/", (root + "/escape").c_str()), 0);
  ASSERT_EQ(::symlink("../../..", (root + "/up").c_str()), 0);
  auto server = volumes::FileServer::start(server_opts_, root, false, "raw");
  ASSERT_TRUE(server.ok()) << server.error().message();
  RawFuse f((*server)->socket().get());
  f.init();
  EXPECT_EQ(f.max_write, 128u * 1024);  // one message fits one agent frame
  EXPECT_EQ(f.call(FUSE_LOOKUP, FUSE_ROOT_ID, name("..")).first, -EINVAL);
  EXPECT_EQ(f.call(FUSE_LOOKUP, FUSE_ROOT_ID, name(".")).first, -EINVAL);
  EXPECT_EQ(f.call(FUSE_LOOKUP, FUSE_ROOT_ID, name("a/b")).first, -EINVAL);
  EXPECT_EQ(f.call(FUSE_LOOKUP, 0xdeadbeef, name("x")).first, -ESTALE);
  EXPECT_EQ(f.call(FUSE_GETATTR, 12345, std::string(sizeof(fuse_getattr_in), '\0')).first, -ESTALE);
  // A symlink is a symlink: never a directory to look beneath, never opened.
  auto [err, body] = f.call(FUSE_LOOKUP, FUSE_ROOT_ID, name("escape"));
  ASSERT_EQ(err, 0);
  fuse_entry_out e;
  std::memcpy(&e, body.data(), sizeof e);
  EXPECT_TRUE(S_ISLNK(e.attr.mode));
  EXPECT_EQ(f.call(FUSE_LOOKUP, e.nodeid, name("etc")).first, -ENOTDIR);
  fuse_open_in oi{};
  oi.flags = O_RDONLY;
  EXPECT_EQ(f.call(FUSE_OPEN, e.nodeid, std::string(reinterpret_cast<char*>(&oi), sizeof oi)).first,
            -ELOOP);
  EXPECT_EQ(
      f.call(FUSE_OPENDIR, e.nodeid, std::string(reinterpret_cast<char*>(&oi), sizeof oi)).first,
      -ENOTDIR);
  // A file handle it never gave.
  fuse_read_in ri{};
  ri.fh = 777;
  ri.size = 4096;
  EXPECT_EQ(
      f.call(FUSE_READ, FUSE_ROOT_ID, std::string(reinterpret_cast<char*>(&ri), sizeof ri)).first,
      -EBADF);
  // A device node, whatever mode the request says.
  fuse_mknod_in mi{};
  mi.mode = S_IFCHR | 0666;
  mi.rdev = makedev(1, 3);
  EXPECT_EQ(f.call(FUSE_MKNOD, FUSE_ROOT_ID,
                   std::string(reinterpret_cast<char*>(&mi), sizeof mi) + name("null"))
                .first,
            -EPERM);
  EXPECT_FALSE(fs::exists(root + "/null"));
}

// --- Locks and extended attributes across sandboxes ----------------------

// fcntl(cmd) of a write or read lock on [start, start+len): 0 or the errno.
int lockRange(int fd, int cmd, short type, off_t start = 0, off_t len = 0) {
  struct flock lk {};
  lk.l_type = type;
  lk.l_whence = SEEK_SET;
  lk.l_start = start;
  lk.l_len = len;
  return ::fcntl(fd, cmd, &lk) == 0 ? 0 : errno;
}

int openRw(const std::string& p) { return ::open(p.c_str(), O_RDWR | O_CLOEXEC); }

TEST_F(VolumeMountTest, LocksConflictAcrossSandboxesAndFollowPosixWithinOne) {
  ASSERT_TRUE(writeAll(*host_->root("vol1") + "/f", "0123456789"));
  Mounted* a = mount("vol1", "a", false);
  Mounted* b = mount("vol1", "b", false);
  ASSERT_TRUE(a && b);
  serve();
  int fa = openRw(a->path + "/f"), fa2 = openRw(a->path + "/f"), fb = openRw(b->path + "/f");
  ASSERT_TRUE(fa >= 0 && fa2 >= 0 && fb >= 0) << std::strerror(errno);
  // One process (one owner) in "sandbox" a: a write lock on 0-4 through
  // one fd, widened through another (POSIX: the owner's, not the fd's).
  ASSERT_EQ(lockRange(fa, F_SETLK, F_WRLCK, 0, 5), 0);
  EXPECT_EQ(lockRange(fa2, F_SETLK, F_WRLCK, 0, 8), 0);
  // Sandbox b (another server on the same file): refused, and told what holds.
  EXPECT_EQ(lockRange(fb, F_SETLK, F_WRLCK, 6, 1), EAGAIN);
  EXPECT_EQ(lockRange(fb, F_SETLK, F_RDLCK, 2, 1), EAGAIN);
  EXPECT_EQ(lockRange(fb, F_SETLK, F_WRLCK, 8, 2), 0);  // beside a's range
  struct flock q {};
  q.l_type = F_WRLCK;
  q.l_whence = SEEK_SET;
  ASSERT_EQ(::fcntl(fb, F_GETLK, &q), 0);
  EXPECT_EQ(q.l_type, F_WRLCK);
  EXPECT_EQ(q.l_start, 0);
  EXPECT_EQ(q.l_len, 8);
  // Another process in sandbox a is another owner: refused too.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int fd = ::open((a->path + "/f").c_str(), O_RDWR);
    ::_exit(fd >= 0 && lockRange(fd, F_SETLK, F_WRLCK, 0, 1) == EAGAIN ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Unlocking part of the range through one fd: the owner's lock shrinks.
  ASSERT_EQ(lockRange(fa, F_SETLK, F_UNLCK, 5, 3), 0);
  EXPECT_EQ(lockRange(fb, F_SETLK, F_WRLCK, 5, 3), 0);
  EXPECT_EQ(lockRange(fb, F_SETLK, F_WRLCK, 4, 1), EAGAIN);
  // Closing any of the owner's fds of the file drops all its locks (POSIX).
  ::close(fa2);
  EXPECT_EQ(lockRange(fb, F_SETLK, F_WRLCK, 0, 5), 0);
  EXPECT_EQ(lockRange(fa, F_SETLK, F_RDLCK, 0, 1), EAGAIN);  // b's now
  ::close(fb);
  EXPECT_EQ(lockRange(fa, F_SETLK, F_WRLCK, 0, 0), 0);
  ::close(fa);
  // flock: per open file, as on Linux, and across sandboxes.
  fa = openRw(a->path + "/f");
  fb = openRw(b->path + "/f");
  ASSERT_EQ(::flock(fa, LOCK_EX | LOCK_NB), 0);
  EXPECT_NE(::flock(fb, LOCK_SH | LOCK_NB), 0);
  EXPECT_EQ(errno, EWOULDBLOCK);
  // Its release drops the flock lock: sent by the kernel after close()
  // returns (FUSE_RELEASE_FLOCK_UNLOCK), so a moment later.
  ::close(fa);
  int got = -1;
  for (int i = 0; i < 200 && got != 0; ++i, ::usleep(10 * 1000))
    got = ::flock(fb, LOCK_SH | LOCK_NB);
  EXPECT_EQ(got, 0) << std::strerror(errno);
  ::close(fb);
}

void onSignal(int) {}

TEST_F(VolumeMountTest, BlockingLocksWaitThenSucceedOrAreInterrupted) {
  ASSERT_TRUE(writeAll(*host_->root("vol1") + "/f", "x"));
  Mounted* a = mount("vol1", "a", false);
  Mounted* b = mount("vol1", "b", false);
  ASSERT_TRUE(a && b);
  serve();
  int fa = openRw(a->path + "/f"), fb = openRw(b->path + "/f");
  ASSERT_TRUE(fa >= 0 && fb >= 0);
  ASSERT_EQ(lockRange(fa, F_SETLK, F_WRLCK), 0);
  ASSERT_EQ(::flock(fa, LOCK_EX | LOCK_NB), 0);
  // F_SETLKW and a blocking flock in b wait for a's locks, b's server
  // answering other calls meanwhile.
  auto posix = std::async(std::launch::async, [&] { return lockRange(fb, F_SETLKW, F_WRLCK); });
  auto bsd = std::async(std::launch::async, [&] { return ::flock(fb, LOCK_EX) == 0 ? 0 : errno; });
  EXPECT_EQ(posix.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  EXPECT_EQ(bsd.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  EXPECT_EQ(readAll(b->path + "/f"), "x");
  ASSERT_EQ(lockRange(fa, F_SETLK, F_UNLCK), 0);
  ASSERT_EQ(posix.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(posix.get(), 0);
  EXPECT_EQ(bsd.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  ::close(fa);
  ASSERT_EQ(bsd.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(bsd.get(), 0);
  // A signal ends a wait with EINTR (FUSE_INTERRUPT), and no waiter stays
  // behind in a's server to take the lock later.
  fa = openRw(a->path + "/f");
  ASSERT_GE(fa, 0);
  struct sigaction sa {};
  sa.sa_handler = onSignal;  // no SA_RESTART: the wait returns EINTR
  ASSERT_EQ(::sigaction(SIGUSR1, &sa, nullptr), 0);
  std::promise<pthread_t> self;
  auto waiting = std::async(std::launch::async, [&] {
    self.set_value(::pthread_self());
    return lockRange(fa, F_SETLKW, F_WRLCK);
  });
  pthread_t t = self.get_future().get();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int i = 0;
       i < 50 && waiting.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready; ++i)
    ::pthread_kill(t, SIGUSR1);
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(1)), std::future_status::ready);
  EXPECT_EQ(waiting.get(), EINTR);
  ::close(fb);  // b's locks go
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int fb2 = openRw(b->path + "/f");
  EXPECT_EQ(lockRange(fb2, F_SETLK, F_WRLCK), 0);
  ::close(fb2);
  ::close(fa);
}

TEST_F(VolumeMountTest, UserXattrsAreSharedAndOthersRefused) {
  auto root = *host_->root("vol1");
  ASSERT_TRUE(writeAll(root + "/f", "x"));
  // Ones the host set, in namespaces no sandbox reaches.
  ASSERT_EQ(::setxattr((root + "/f").c_str(), "trusted.host", "h", 1, 0), 0);
  ASSERT_EQ(::setxattr((root + "/f").c_str(), "security.host", "h", 1, 0), 0);
  Mounted* a = mount("vol1", "a", false);
  Mounted* b = mount("vol1", "b", false);
  Mounted* ro = mount("vol1", "ro", true);
  ASSERT_TRUE(a && b && ro);
  serve();
  std::string fa = a->path + "/f", fb = b->path + "/f";
  ASSERT_EQ(::setxattr(fa.c_str(), "user.k", "value", 5, XATTR_CREATE), 0) << std::strerror(errno);
  EXPECT_EQ(::setxattr(fa.c_str(), "user.k", "v", 1, XATTR_CREATE), -1);
  EXPECT_EQ(errno, EEXIST);
  ASSERT_EQ(::mkdir((a->path + "/d").c_str(), 0755), 0);
  EXPECT_EQ(::setxattr((a->path + "/d").c_str(), "user.dir", "", 0, 0), 0) << std::strerror(errno);
  // Read in the other sandbox and on the host.
  char buf[256];
  ssize_t n = ::getxattr(fb.c_str(), "user.k", buf, sizeof buf);
  ASSERT_EQ(n, 5) << std::strerror(errno);
  EXPECT_EQ(std::string(buf, 5), "value");
  EXPECT_EQ(::getxattr(fb.c_str(), "user.k", nullptr, 0), 5);
  EXPECT_EQ(::getxattr(fb.c_str(), "user.k", buf, 2), -1);
  EXPECT_EQ(errno, ERANGE);
  EXPECT_EQ(::getxattr((root + "/f").c_str(), "user.k", buf, sizeof buf), 5);
  EXPECT_EQ(::getxattr((b->path + "/d").c_str(), "user.dir", buf, sizeof buf), 0);
  // The list names user.* only; the host's are absent.
  n = ::listxattr(fb.c_str(), buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), std::string("user.k\0", 7));
  for (const char* host_name : {"trusted.host", "security.host"}) {
    EXPECT_EQ(::getxattr(fb.c_str(), host_name, buf, sizeof buf), -1);
    EXPECT_EQ(errno, ENODATA) << host_name;
  }
  EXPECT_EQ(::setxattr(fa.c_str(), "trusted.x", "1", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::setxattr(fa.c_str(), "security.x", "1", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  // A read-only mount reads them and changes none.
  EXPECT_EQ(::getxattr((ro->path + "/f").c_str(), "user.k", buf, sizeof buf), 5);
  EXPECT_EQ(::setxattr((ro->path + "/f").c_str(), "user.k", "2", 1, 0), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::removexattr((ro->path + "/f").c_str(), "user.k"), -1);
  EXPECT_EQ(errno, EROFS);
  // Removed in one sandbox, gone in the other.
  ASSERT_EQ(::removexattr(fa.c_str(), "user.k"), 0) << std::strerror(errno);
  EXPECT_EQ(::getxattr(fb.c_str(), "user.k", buf, sizeof buf), -1);
  EXPECT_EQ(errno, ENODATA);
  EXPECT_EQ(::listxattr(fb.c_str(), buf, sizeof buf), 0);
  EXPECT_EQ(::getxattr((root + "/f").c_str(), "trusted.host", buf, sizeof buf), 1);
  EXPECT_EQ(::getxattr((root + "/f").c_str(), "security.host", buf, sizeof buf), 1);
}

TEST_F(VolumeMountTest, ServerRefusesXattrsBeyondUserAndOnReadOnly) {
  auto root = *host_->root("vol1");
  ASSERT_TRUE(writeAll(root + "/f", "x"));
  ASSERT_EQ(::symlink("f", (root + "/l").c_str()), 0);
  auto rw = volumes::FileServer::start(server_opts_, root, false, "raw");
  auto ro = volumes::FileServer::start(server_opts_, root, true, "raw-ro");
  ASSERT_TRUE(rw.ok() && ro.ok());
  RawFuse w((*rw)->socket().get()), r((*ro)->socket().get());
  w.init();
  r.init();
  auto nodeOf = [](RawFuse& f, const char* n) -> uint64_t {
    auto [err, body] = f.call(FUSE_LOOKUP, FUSE_ROOT_ID, name(n));
    fuse_entry_out e{};
    if (err == 0) std::memcpy(&e, body.data(), sizeof e);
    return e.nodeid;
  };
  // FUSE_SETXATTR as a kernel without FUSE_SETXATTR_EXT sends it.
  auto set = [](RawFuse& f, uint64_t node, const std::string& n, const std::string& v) {
    fuse_setxattr_in in{};
    in.size = static_cast<uint32_t>(v.size());
    std::string body(reinterpret_cast<char*>(&in), FUSE_COMPAT_SETXATTR_IN_SIZE);
    return f.call(FUSE_SETXATTR, node, body + n + '\0' + v).first;
  };
  uint64_t f = nodeOf(w, "f"), l = nodeOf(w, "l"), rf = nodeOf(r, "f");
  ASSERT_TRUE(f && l && rf);
  EXPECT_EQ(set(w, f, "user.ok", "1"), 0);
  EXPECT_EQ(set(w, f, "trusted.x", "1"), -EPERM);
  EXPECT_EQ(set(w, f, "security.capability", "1"), -EPERM);
  EXPECT_EQ(set(w, f, "system.posix_acl_access", "1"), -EPERM);
  EXPECT_EQ(set(w, f, "other.x", "1"), -EOPNOTSUPP);
  EXPECT_EQ(set(w, f, "user." + std::string(251, 'n'), "1"), -ERANGE);  // 256 bytes
  EXPECT_EQ(set(w, f, "user.big", std::string(65537, 'v')), -E2BIG);
  EXPECT_EQ(set(w, l, "user.x", "1"), -EPERM);  // a link takes none
  EXPECT_EQ(set(r, rf, "user.ok", "2"), -EROFS);
  EXPECT_EQ(r.call(FUSE_REMOVEXATTR, rf, name("user.ok")).first, -EROFS);
  fuse_getxattr_in gi{};
  gi.size = 64;
  auto [err, body] = r.call(FUSE_GETXATTR, rf,
                            std::string(reinterpret_cast<char*>(&gi), sizeof gi) + name("user.ok"));
  EXPECT_EQ(err, 0);
  EXPECT_EQ(body, "1");
  char v[8];
  EXPECT_EQ(::getxattr((root + "/f").c_str(), "user.ok", v, sizeof v), 1);
  EXPECT_EQ(::getxattr((root + "/f").c_str(), "user.big", v, sizeof v), -1);
}

}  // namespace
}  // namespace vessel
