// The agent in a real QEMU guest (TCG here), through AgentClient: processes,
// terminals, large transfers, concurrency, reattach, identity and PID-1
// duties. One VM is booted for the whole binary (a cold boot costs ~1 s of
// TCG); every test leaves it as it found it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdlib>
#include <fstream>

#include "agentclient/agent_client.h"
#include "agentclient/testing/agent_harness.h"
#include "base/fd.h"
#include "guest_env.h"
#include "hypervisor/qemu/qemu.h"
#include "node/machine.h"
#include "sanitizers.h"

namespace vessel {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using agentclient::ExecSpec;
using agentclient::ProcessEvent;
using agentclient::testing::runFor;

// Host RSS, to show that a large transfer does not accumulate on the host.
size_t rssBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}

class AgentGuestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    io_ = new asio::io_context();
    dir_ = new testing::ScratchDir();
    hv_ = new hypervisor::qemu::QemuHypervisor({});
    // A writable scratch disk for the 1 GiB transfer: the root image is
    // read-only and /tmp lives in the guest's 256 MiB of RAM.
    std::string scratch = dir_->path() + "/scratch.ext4";
    std::string mkfs = "truncate -s 1300M " + scratch + " && mkfs.ext4 -q -F " + scratch;
    ASSERT_EQ(std::system(mkfs.c_str()), 0);
    hypervisor::MachineSpec spec = testing::minimalSpec("agt" + std::to_string(::getpid()), *dir_);
    spec.disks.push_back({scratch, false, "raw"});
    auto m = runFor(*io_, node::bootMachine(*hv_, spec, node::Clock::now() + 60s), 90s);
    ASSERT_TRUE(m.ok()) << m.error().message();
    machine_ = new node::Machine(std::move(*m));
    agent_socket_ = new std::string(spec.run_dir + "/agent.sock");
    client_ = new std::shared_ptr<agentclient::AgentClient>(agentclient::AgentClient::create(
        std::move(machine_->vm->agentChannel()), std::move(machine_->leftover), "agent-test"));
  }
  static void TearDownTestSuite() {
    if (client_) (*client_)->close();
    if (machine_) EXPECT_TRUE(runFor(*io_, machine_->vm->stop(), 30s).ok());
    // No QEMU of this binary may outlive it.
    EXPECT_TRUE(testing::qemuProcessesFor("agt" + std::to_string(::getpid())).empty());
    delete client_;
    delete agent_socket_;
    delete machine_;
    delete hv_;
    delete dir_;
    delete io_;
  }
  void SetUp() override {
    ASSERT_NE(client_, nullptr) << "the shared guest did not boot";
    c_ = *client_;
    ASSERT_FALSE(c_->failure()) << c_->failure()->message();
  }
  void TearDown() override {
    if (c_) EXPECT_FALSE(c_->failure()) << c_->failure()->message();
  }
  Result<agentclient::ExecResult> sh(std::string cmd, std::string user = "root",
                                     std::chrono::seconds limit = 60s) {
    ExecSpec s;
    s.shell = std::move(cmd);
    s.user = std::move(user);
    return runFor(*io_, c_->run(s), limit);
  }

  static asio::io_context* io_;
  static testing::ScratchDir* dir_;
  static hypervisor::qemu::QemuHypervisor* hv_;
  static node::Machine* machine_;
  static std::shared_ptr<agentclient::AgentClient>* client_;
  static std::string* agent_socket_;
  std::shared_ptr<agentclient::AgentClient> c_;
};

asio::io_context* AgentGuestTest::io_ = nullptr;
testing::ScratchDir* AgentGuestTest::dir_ = nullptr;
hypervisor::qemu::QemuHypervisor* AgentGuestTest::hv_ = nullptr;
node::Machine* AgentGuestTest::machine_ = nullptr;
std::shared_ptr<agentclient::AgentClient>* AgentGuestTest::client_ = nullptr;
std::string* AgentGuestTest::agent_socket_ = nullptr;

TEST_F(AgentGuestTest, Pid1MountsAndDefaultUser) {
  auto r = sh("cat /proc/mounts");
  ASSERT_TRUE(r.ok()) << r.error().message();
  for (const char* fs : {" /proc proc", " /sys sysfs", " /dev devtmpfs", " /dev/pts devpts",
                         " /tmp tmpfs", " /sys/fs/cgroup cgroup2"})
    EXPECT_NE(r->out.find(fs), std::string::npos) << fs << " missing in\n" << r->out;
  ExecSpec s;
  s.shell = "id -u; echo $HOME; pwd";
  auto u = runFor(*io_, c_->run(s));
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->out, "1000\n/home/user\n/home/user\n");
}

TEST_F(AgentGuestTest, ExitCodesAndSignals) {
  auto r = sh("exit 42");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->exit.exited);
  EXPECT_EQ(r->exit.code, 42);
  r = sh("kill -KILL $$");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->exit.exited);
  EXPECT_EQ(r->exit.signal, SIGKILL);
  ExecSpec s;
  s.argv = {"sleep", "60"};
  auto p = runFor(*io_, c_->exec(s));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(runFor(*io_, (*p)->signal(SIGTERM)).ok());
  auto ev = runFor(*io_, (*p)->next(), 20s);
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->exit.signal, SIGTERM);
  s.timeout = 500ms;
  auto t = runFor(*io_, c_->run(s), 20s);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->exit.timed_out);
}

TEST_F(AgentGuestTest, StdoutAndStderrSeparate) {
  auto r = sh("echo to-out; echo to-err >&2; echo more-out");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "to-out\nmore-out\n");
  EXPECT_EQ(r->err, "to-err\n");
}

TEST_F(AgentGuestTest, StdinRoundTrip) {
  ExecSpec s;
  s.argv = {"sha256sum"};
  auto p = runFor(*io_, c_->exec(s));
  ASSERT_TRUE(p.ok());
  std::string data = agentclient::testing::PatternSource(11).next(2 << 20);
  agentclient::testing::Sha256 sha;
  sha.update(data);
  ASSERT_TRUE(runFor(*io_, (*p)->writeStdin(data)).ok());
  ASSERT_TRUE(runFor(*io_, (*p)->closeStdin()).ok());
  std::string out;
  for (;;) {
    auto ev = runFor(*io_, (*p)->next(), 30s);
    ASSERT_TRUE(ev.ok()) << ev.error().message();
    if (ev->kind == ProcessEvent::Kind::kExit) break;
    out += ev->data;
  }
  EXPECT_EQ(out.substr(0, 64), sha.hex());
}

TEST_F(AgentGuestTest, PtyTtyAndResize) {
  ExecSpec s;
  s.shell = "tty; stty size; read x; stty size";
  s.pty = true;
  s.rows = 33;
  s.cols = 91;
  auto p = runFor(*io_, c_->exec(s));
  ASSERT_TRUE(p.ok()) << p.error().message();
  std::string out;
  auto readUntil = [&](std::string needle) -> asio::awaitable<Result<bool>> {
    while (out.find(needle) == std::string::npos) {
      VESSEL_CO_ASSIGN_OR_RETURN(ProcessEvent ev, co_await (*p)->next());
      if (ev.kind == ProcessEvent::Kind::kExit) co_return false;
      out += ev.data;
    }
    co_return true;
  };
  auto r = runFor(*io_, readUntil("33 91"), 20s);
  ASSERT_TRUE(r.ok() && *r) << out;
  EXPECT_EQ(out.rfind("/dev/pts/", 0), 0u) << out;
  ASSERT_TRUE(runFor(*io_, (*p)->resize(50, 132)).ok());
  ASSERT_TRUE(runFor(*io_, (*p)->writeStdin("\n")).ok());
  r = runFor(*io_, readUntil("50 132"), 20s);
  ASSERT_TRUE(r.ok() && *r) << out;
}

TEST_F(AgentGuestTest, HundredMiBOutputWithChecksumAndBoundedHostMemory) {
  // 1 MiB of known bytes in the guest, printed 100 times.
  std::string block = agentclient::testing::PatternSource(5).next(1 << 20);
  {
    agentclient::WriteFileOptions o;
    o.path = "/tmp/block";
    auto w = runFor(*io_, c_->writeFile(o));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(runFor(*io_, (*w)->write(block)).ok());
    ASSERT_TRUE(runFor(*io_, (*w)->finish()).ok());
  }
  agentclient::testing::Sha256 want;
  for (int i = 0; i < 100; ++i) want.update(block);
  ExecSpec s;
  s.shell = "i=0; while [ $i -lt 100 ]; do cat /tmp/block; i=$((i+1)); done";
  s.user = "root";
  auto p = runFor(*io_, c_->exec(s));
  ASSERT_TRUE(p.ok());
  size_t rss_before = rssBytes();
  size_t max_buffered = 0, got = 0;
  agentclient::testing::Sha256 sha;
  auto drain = [&]() -> asio::awaitable<Result<agentclient::ExitInfo>> {
    for (;;) {
      max_buffered = std::max(max_buffered, c_->bufferedBytes());
      VESSEL_CO_ASSIGN_OR_RETURN(ProcessEvent ev, co_await (*p)->next());
      if (ev.kind == ProcessEvent::Kind::kExit) co_return ev.exit;
      got += ev.data.size();
      sha.update(ev.data);
    }
  };
  auto exit = runFor(*io_, drain(), 300s);
  ASSERT_TRUE(exit.ok()) << exit.error().message();
  EXPECT_EQ(exit->code, 0);
  EXPECT_EQ(got, 100u << 20);
  EXPECT_EQ(sha.hex(), want.hex());
  EXPECT_LE(max_buffered, agentproto::kInitialWindow);
  if (testing::kRssBudgetsApply)
    EXPECT_LT(rssBytes(), rss_before + (32u << 20)) << "host memory grew with the output";
  EXPECT_TRUE(runFor(*io_, c_->remove("/tmp/block")).ok());
}

TEST_F(AgentGuestTest, OneGiBUploadAndDownloadWithChecksum) {
  auto m = sh("mount -t ext4 /dev/vdb /mnt && chmod 1777 /mnt");
  ASSERT_TRUE(m.ok() && m->exit.code == 0) << (m.ok() ? m->err : m.error().message());
  constexpr size_t kSize = size_t{1} << 30;
  agentclient::WriteFileOptions o;
  o.path = "/mnt/big";
  o.mode = 0600;
  auto w = runFor(*io_, c_->writeFile(o));
  ASSERT_TRUE(w.ok());
  agentclient::testing::PatternSource src(99);
  agentclient::testing::Sha256 up;
  for (size_t done = 0; done < kSize; done += 1 << 20) {
    std::string chunk = src.next(1 << 20);
    up.update(chunk);
    ASSERT_TRUE(runFor(*io_, (*w)->write(chunk), 60s).ok());
  }
  ASSERT_TRUE(runFor(*io_, (*w)->finish(), 120s).ok());
  std::string up_hex = up.hex();
  auto guest_sum = sh("sha256sum /mnt/big", "root", 300s);
  ASSERT_TRUE(guest_sum.ok());
  EXPECT_EQ(guest_sum->out.substr(0, 64), up_hex);
  auto r = runFor(*io_, c_->readFile("/mnt/big"));
  ASSERT_TRUE(r.ok());
  agentclient::testing::Sha256 down;
  size_t got = 0;
  for (;;) {
    auto chunk = runFor(*io_, (*r)->read(), 60s);
    ASSERT_TRUE(chunk.ok()) << chunk.error().message();
    if (!chunk->has_value()) break;
    got += (*chunk)->size();
    down.update(**chunk);
  }
  EXPECT_EQ(got, kSize);
  EXPECT_EQ(down.hex(), up_hex);
  EXPECT_TRUE(sh("rm /mnt/big && umount /mnt").ok());
}

TEST_F(AgentGuestTest, FiftyConcurrentProcesses) {
  constexpr int kN = 50;
  std::vector<std::optional<Result<agentclient::ExecResult>>> results(kN);
  for (int i = 0; i < kN; ++i) {
    asio::co_spawn(
        *io_,
        [&, i]() -> asio::awaitable<void> {
          ExecSpec s;
          s.shell = "sleep 1; echo " + std::to_string(i);
          auto op = c_->run(s);
          results[i].emplace(co_await std::move(op));
        },
        asio::detached);
  }
  auto all = [&]() -> asio::awaitable<Result<bool>> {
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (;;) {
      bool done = true;
      for (auto& r : results) done = done && r.has_value();
      if (done) co_return true;
      t.expires_after(20ms);
      co_await t.async_wait(asio::use_awaitable);
    }
  };
  ASSERT_TRUE(runFor(*io_, all(), 120s).ok());
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(results[i]->ok()) << results[i]->error().message();
    EXPECT_EQ((*results[i])->out, std::to_string(i) + "\n");
  }
}

TEST_F(AgentGuestTest, ReattachAfterDisconnect) {
  ExecSpec s;
  s.shell = "echo before; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo after; exit 5";
  s.user = "root";
  auto p = runFor(*io_, c_->exec(s));
  ASSERT_TRUE(p.ok());
  uint32_t pid = (*p)->pid();
  auto ev = runFor(*io_, (*p)->next(), 20s);
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->data, "before\n");
  p->reset();  // the client goes away
  auto procs = runFor(*io_, c_->listProcesses());
  ASSERT_TRUE(procs.ok());
  bool detached = false;
  for (const auto& pi : *procs) detached |= pi.pid == pid && pi.running && !pi.attached;
  EXPECT_TRUE(detached);
  ASSERT_TRUE(sh("touch /tmp/go").ok());
  auto q = runFor(*io_, c_->attach(pid));
  ASSERT_TRUE(q.ok()) << q.error().message();
  std::string out;
  agentclient::ExitInfo exit;
  for (;;) {
    auto e = runFor(*io_, (*q)->next(), 20s);
    ASSERT_TRUE(e.ok()) << e.error().message();
    if (e->kind == ProcessEvent::Kind::kExit) {
      exit = e->exit;
      break;
    }
    out += e->data;
  }
  EXPECT_EQ(out, "after\n");
  EXPECT_EQ(exit.code, 5);
  EXPECT_EQ((*q)->lostBytes(), 0u);
  EXPECT_TRUE(sh("rm /tmp/go").ok());
}

TEST_F(AgentGuestTest, IdentityAndOrphanReaping) {
  ASSERT_TRUE(runFor(*io_, c_->setHostname("sbx-test")).ok());
  ASSERT_TRUE(runFor(*io_, c_->setClock(std::chrono::system_clock::from_time_t(1893456000)))
                  .ok());  // 2030-01-01
  ASSERT_TRUE(runFor(*io_, c_->addEntropy(agentclient::testing::PatternSource(1).next(64))).ok());
  auto r = sh("hostname; date -u +%Y");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "sbx-test\n2030\n");
  ASSERT_TRUE(runFor(*io_, c_->setClock(std::chrono::system_clock::now())).ok());
  // Orphans (the backgrounded sleeps) are re-parented to PID 1 and reaped.
  ASSERT_TRUE(sh("for i in 1 2 3 4 5; do sleep 0.1 & done; exit 0").ok());
  auto zombies = [&]() -> asio::awaitable<Result<bool>> {
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (int i = 0; i < 100; ++i) {
      ExecSpec s;
      s.shell = "grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l";
      auto op = c_->run(s);
      VESSEL_CO_ASSIGN_OR_RETURN(auto res, co_await std::move(op));
      if (res.out == "0\n") co_return true;
      t.expires_after(50ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    co_return false;
  };
  auto z = runFor(*io_, zombies(), 60s);
  ASSERT_TRUE(z.ok());
  EXPECT_TRUE(*z) << "zombies remain";
}

TEST_F(AgentGuestTest, ReattachAfterTheHostReconnects) {
  // What a restarted vesseld does: the old channel closes, a new connection
  // to the VM's agent socket gets a fresh Hello, and the processes that kept
  // running are attached again.
  ExecSpec s;
  s.shell = "echo before; while [ ! -e /tmp/go2 ]; do sleep 0.05; done; echo after; exit 6";
  s.user = "root";
  auto p = runFor(*io_, c_->exec(s));
  ASSERT_TRUE(p.ok());
  uint32_t pid = (*p)->pid();
  auto ev = runFor(*io_, (*p)->next(), 20s);
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->data, "before\n");
  c_->close();
  p->reset();
  agentclient::AgentClient::Socket sock(*io_);
  boost::system::error_code ec;
  sock.connect(asio::local::stream_protocol::endpoint(*agent_socket_), ec);
  ASSERT_FALSE(ec) << ec.message();
  auto fresh = runFor(*io_,
                      agentclient::AgentClient::reconnect(std::move(sock), "agent-test",
                                                          std::chrono::steady_clock::now() + 20s),
                      30s);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message() << "\n" << machine_->vm->diagnostics();
  *client_ = *fresh;
  c_ = *client_;
  auto q = runFor(*io_, c_->attach(pid));
  ASSERT_TRUE(q.ok()) << q.error().message();
  ASSERT_TRUE(sh("touch /tmp/go2").ok());
  std::string out;
  agentclient::ExitInfo exit;
  for (;;) {
    auto e = runFor(*io_, (*q)->next(), 20s);
    ASSERT_TRUE(e.ok()) << e.error().message();
    if (e->kind == ProcessEvent::Kind::kExit) {
      exit = e->exit;
      break;
    }
    out += e->data;
  }
  EXPECT_EQ(out, "after\n");
  EXPECT_EQ(exit.code, 6);
  EXPECT_TRUE(sh("rm /tmp/go2").ok());
}

TEST_F(AgentGuestTest, ReconnectInTheMiddleOfHeavyOutput) {
  // The old session is cut while frames are half on the wire: the new one
  // must still start cleanly, and the process is still there to attach to.
  ExecSpec s;
  s.argv = {"cat", "/dev/zero"};
  auto p = runFor(*io_, c_->exec(s));
  ASSERT_TRUE(p.ok());
  uint32_t pid = (*p)->pid();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(runFor(*io_, (*p)->next(), 20s).ok());
  c_->close();
  p->reset();
  agentclient::AgentClient::Socket sock(*io_);
  boost::system::error_code ec;
  sock.connect(asio::local::stream_protocol::endpoint(*agent_socket_), ec);
  ASSERT_FALSE(ec) << ec.message();
  auto fresh = runFor(*io_,
                      agentclient::AgentClient::reconnect(std::move(sock), "agent-test",
                                                          std::chrono::steady_clock::now() + 20s),
                      30s);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message();
  *client_ = *fresh;
  c_ = *client_;
  auto q = runFor(*io_, c_->attach(pid));
  ASSERT_TRUE(q.ok()) << q.error().message();
  size_t got = 0;
  while (got < (4u << 20)) {
    auto e = runFor(*io_, (*q)->next(), 20s);
    ASSERT_TRUE(e.ok()) << e.error().message();
    ASSERT_EQ(e->kind, ProcessEvent::Kind::kStdout);
    ASSERT_EQ(e->data.find_first_not_of('\0'), std::string::npos);
    got += e->data.size();
  }
  ASSERT_TRUE(runFor(*io_, (*q)->signal(SIGKILL)).ok());
  for (;;) {
    auto e = runFor(*io_, (*q)->next(), 20s);
    ASSERT_TRUE(e.ok()) << e.error().message();
    if (e->kind == ProcessEvent::Kind::kExit) {
      EXPECT_EQ(e->exit.signal, SIGKILL);
      break;
    }
  }
}

}  // namespace
}  // namespace vessel
