// AgentClient against the real agent run on the host over a socketpair (no
// VM): the protocol, flow control, processes and files end to end, fast.
#include "agentclient/agent_client.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>

#include "agentclient/testing/agent_harness.h"
#include "base/fd.h"

namespace vessel::agentclient {
namespace {

using testing::runFor;
using namespace std::chrono_literals;

class AgentClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto h = testing::HostAgent::start(io_, VESSEL_AGENT_BINARY);
    ASSERT_TRUE(h.ok()) << h.error().message();
    agent_ = std::move(*h);
    c_ = agent_->client();
    char tmpl[] = "/tmp/vessel-agent-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) {
      auto r = runFor(io_, c_->remove(dir_, true), 10s);
      EXPECT_TRUE(r.ok()) << r.error().message();
    }
    if (c_) EXPECT_FALSE(c_->failure()) << c_->failure()->message();
  }
  Result<ExecResult> sh(std::string cmd, std::string user = "root") {
    ExecSpec s;
    s.shell = std::move(cmd);
    s.user = std::move(user);
    return runFor(io_, c_->run(s), 30s);
  }

  asio::io_context io_;
  std::unique_ptr<testing::HostAgent> agent_;
  std::shared_ptr<AgentClient> c_;
  std::string dir_;
};

TEST_F(AgentClientTest, PingAndDefaultEnv) {
  ASSERT_TRUE(runFor(io_, c_->ping()).ok());
  ASSERT_TRUE(runFor(io_, c_->setDefaultEnv({"VESSEL_X=from-default"})).ok());
  auto r = sh("echo $VESSEL_X $HOME $USER");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->out, "from-default /root root\n");
  EXPECT_FALSE(runFor(io_, c_->setDefaultEnv({"NOEQUALS"})).ok());
}

TEST_F(AgentClientTest, RunsAsUnprivilegedUserByDefault) {
  ExecSpec s;
  s.argv = {"id", "-u"};
  auto r = runFor(io_, c_->run(s));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->out, "1000\n");
}

TEST_F(AgentClientTest, ExitCodesSignalsAndTimeouts) {
  auto r = sh("exit 3");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->exit.exited);
  EXPECT_EQ(r->exit.code, 3);
  r = sh("kill -TERM $$");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->exit.exited);
  EXPECT_EQ(r->exit.signal, SIGTERM);
  ExecSpec s;
  s.shell = "sleep 30";
  s.timeout = 300ms;
  r = runFor(io_, c_->run(s), 10s);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->exit.timed_out);
  EXPECT_EQ(r->exit.signal, SIGKILL);
  // A program that does not exist is an Error, not an exit code 127.
  s = {};
  s.argv = {"/nonexistent/program"};
  auto p = runFor(io_, c_->exec(s));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code(), Code::kNotFound);
}

TEST_F(AgentClientTest, SignalByPid) {
  ExecSpec s;
  s.argv = {"sleep", "30"};
  auto p = runFor(io_, c_->exec(s));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(runFor(io_, (*p)->signal(SIGINT)).ok());
  auto ev = runFor(io_, (*p)->next(), 10s);
  ASSERT_TRUE(ev.ok()) << ev.error().message();
  EXPECT_EQ(ev->kind, ProcessEvent::Kind::kExit);
  EXPECT_EQ(ev->exit.signal, SIGINT);
  EXPECT_FALSE(runFor(io_, c_->signal(999999, SIGINT)).ok());
}

TEST_F(AgentClientTest, StdoutAndStderrSeparate) {
  auto r = sh("echo out; echo err >&2; echo out2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "out\nout2\n");
  EXPECT_EQ(r->err, "err\n");
}

TEST_F(AgentClientTest, StdinRoundTrip) {
  ExecSpec s;
  s.argv = {"cat"};
  auto p = runFor(io_, c_->exec(s));
  ASSERT_TRUE(p.ok());
  std::string big = testing::PatternSource(7).next(3 << 20);  // beyond one window
  auto collect = [&]() -> asio::awaitable<Result<std::string>> {
    std::string out;
    for (;;) {
      VESSEL_CO_ASSIGN_OR_RETURN(ProcessEvent ev, co_await (*p)->next());
      if (ev.kind == ProcessEvent::Kind::kExit) co_return out;
      out += ev.data;
    }
  };
  Status wrote = Error(Code::kInternal, "writer did not finish");
  auto writer = [&]() -> asio::awaitable<void> {
    wrote = co_await (*p)->writeStdin(big);
    if (wrote.ok()) wrote = co_await (*p)->closeStdin();
  };
  asio::co_spawn(io_, writer(), asio::detached);
  auto out = runFor(io_, collect());
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_TRUE(wrote.ok()) << wrote.error().message();
  EXPECT_TRUE(*out == big) << out->size();
}

TEST_F(AgentClientTest, PtyTtyAndResize) {
  ExecSpec s;
  s.shell = "tty; stty size; read x; stty size";
  s.pty = true;
  s.rows = 40;
  s.cols = 100;
  auto p = runFor(io_, c_->exec(s));
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
  auto r = runFor(io_, readUntil("40 100"), 10s);
  ASSERT_TRUE(r.ok() && *r) << out;
  EXPECT_EQ(out.rfind("/dev/pts/", 0), 0u) << out;
  ASSERT_TRUE(runFor(io_, (*p)->resize(50, 132)).ok());
  ASSERT_TRUE(runFor(io_, (*p)->writeStdin("\n")).ok());
  r = runFor(io_, readUntil("50 132"), 10s);
  ASSERT_TRUE(r.ok() && *r) << out;
}

TEST_F(AgentClientTest, LargeOutputIsFlowControlled) {
  constexpr size_t kTotal = 64 << 20;
  ExecSpec s;
  s.shell = "head -c " + std::to_string(kTotal) + " /dev/zero";
  auto p = runFor(io_, c_->exec(s));
  ASSERT_TRUE(p.ok());
  // Not reading: the guest must stop at the window instead of flooding us.
  io_.restart();
  io_.run_until(std::chrono::steady_clock::now() + 500ms);
  EXPECT_LE(c_->bufferedBytes(), agentproto::kInitialWindow);
  size_t got = 0;
  bool exited = false;
  auto drain = [&]() -> asio::awaitable<Result<bool>> {
    for (;;) {
      VESSEL_CO_ASSIGN_OR_RETURN(ProcessEvent ev, co_await (*p)->next());
      if (ev.kind == ProcessEvent::Kind::kExit) co_return ev.exit.exited&& ev.exit.code == 0;
      got += ev.data.size();
      if (c_->bufferedBytes() > agentproto::kInitialWindow) co_return false;
    }
  };
  auto r = runFor(io_, drain(), 120s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  exited = *r;
  EXPECT_TRUE(exited);
  EXPECT_EQ(got, kTotal);
}

TEST_F(AgentClientTest, ManyConcurrentProcesses) {
  constexpr int kN = 100;
  std::vector<std::optional<Result<ExecResult>>> results(kN);
  for (int i = 0; i < kN; ++i) {
    asio::co_spawn(
        io_,
        [&, i]() -> asio::awaitable<void> {
          ExecSpec s;
          s.shell = "sleep 0.5; echo " + std::to_string(i);
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
  ASSERT_TRUE(runFor(io_, all(), 60s).ok());
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(results[i]->ok()) << results[i]->error().message();
    EXPECT_EQ((*results[i])->out, std::to_string(i) + "\n");
  }
}

TEST_F(AgentClientTest, ReattachAfterDetach) {
  std::string gate = dir_ + "/gate";
  ASSERT_EQ(::mkfifo(gate.c_str(), 0666), 0);
  ExecSpec s;
  s.shell = "echo first; read x < " + gate + "; echo second; exit 7";
  s.user = "root";  // the scratch directory is root's
  auto p = runFor(io_, c_->exec(s));
  ASSERT_TRUE(p.ok());
  uint32_t pid = (*p)->pid();
  auto ev = runFor(io_, (*p)->next());
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->data, "first\n");
  p->reset();  // the client goes away; the process keeps running
  auto procs = runFor(io_, c_->listProcesses());
  ASSERT_TRUE(procs.ok());
  bool seen = false;
  for (const auto& pi : *procs) seen |= pi.pid == pid && pi.running;
  EXPECT_TRUE(seen);
  // Let it print and exit while detached.
  {
    int fd = ::open(gate.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "\n", 1), 1);
    ::close(fd);
  }
  auto q = runFor(io_, c_->attach(pid));
  ASSERT_TRUE(q.ok()) << q.error().message();
  EXPECT_EQ((*q)->lostBytes(), 0u);
  std::string out;
  ExitInfo exit;
  for (;;) {
    auto e = runFor(io_, (*q)->next(), 10s);
    ASSERT_TRUE(e.ok()) << e.error().message();
    if (e->kind == ProcessEvent::Kind::kExit) {
      exit = e->exit;
      break;
    }
    out += e->data;
  }
  EXPECT_EQ(out, "second\n");
  EXPECT_EQ(exit.code, 7);
  EXPECT_FALSE(runFor(io_, c_->attach(pid)).ok());  // reported once, then gone
}

TEST_F(AgentClientTest, DetachedOutputBeyondBufferIsReportedLost) {
  std::string gate = dir_ + "/gate";
  ASSERT_EQ(::mkfifo(gate.c_str(), 0600), 0);
  ExecSpec s;
  s.shell = "read x < " + gate + "; head -c 3145728 /dev/zero";
  s.user = "root";
  auto p = runFor(io_, c_->exec(s));
  ASSERT_TRUE(p.ok());
  uint32_t pid = (*p)->pid();
  p->reset();
  // Frames are handled in order: after the ping the agent has detached it,
  // so all of the output happens while nobody is attached.
  ASSERT_TRUE(runFor(io_, c_->ping()).ok());
  {
    int fd = ::open(gate.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "\n", 1), 1);
    ::close(fd);
  }
  // Bounded wait for the detached process to finish.
  auto finished = [&]() -> asio::awaitable<Result<bool>> {
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (;;) {
      VESSEL_CO_ASSIGN_OR_RETURN(auto procs, co_await c_->listProcesses());
      for (const auto& pi : procs)
        if (pi.pid == pid && !pi.running) co_return true;
      t.expires_after(20ms);
      co_await t.async_wait(asio::use_awaitable);
    }
  };
  ASSERT_TRUE(runFor(io_, finished(), 30s).ok());
  auto q = runFor(io_, c_->attach(pid));
  ASSERT_TRUE(q.ok());
  size_t got = 0;
  for (;;) {
    auto e = runFor(io_, (*q)->next(), 10s);
    ASSERT_TRUE(e.ok());
    if (e->kind == ProcessEvent::Kind::kExit) break;
    got += e->data.size();
  }
  EXPECT_GT((*q)->lostBytes(), 0u);
  EXPECT_EQ(got + (*q)->lostBytes(), 3145728u);
}

TEST_F(AgentClientTest, AgentDeathFailsCallsAsUnavailable) {
  ExecSpec s;
  s.argv = {"sleep", "30"};
  auto p = runFor(io_, c_->exec(s));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(agent_->process().signal(SIGKILL).ok());
  auto ev = runFor(io_, (*p)->next(), 10s);
  ASSERT_FALSE(ev.ok());
  EXPECT_EQ(ev.error().code(), Code::kUnavailable);
  auto ping = runFor(io_, c_->ping(), 2s);
  ASSERT_FALSE(ping.ok());
  EXPECT_EQ(ping.error().code(), Code::kUnavailable);
  // Nothing cleans up through a dead agent: the test does it itself.
  ::kill(static_cast<pid_t>((*p)->pid()), SIGKILL);
  std::filesystem::remove_all(dir_);
  dir_.clear();
  c_.reset();
}

// The command log's observer: told of each command a front end ran (an
// origin set) at its start and at its exit, whichever handle reads it; the
// environment's names, never its values; the host's own commands not at all.
TEST_F(AgentClientTest, CommandObserverHearsFrontEndCommandsOnce) {
  struct Seen : CommandObserver {
    std::vector<CommandNote> started_, ended_;
    std::vector<ExitInfo> exits;
    void started(const CommandNote& c) override { started_.push_back(c); }
    void ended(const CommandNote& c, const ExitInfo& e) override {
      ended_.push_back(c);
      exits.push_back(e);
    }
  };
  auto seen = std::make_shared<Seen>();
  c_->setCommandObserver(seen);
  ASSERT_TRUE(sh("echo host").ok());  // no origin: not logged
  EXPECT_TRUE(seen->started_.empty());

  ExecSpec s;
  s.shell = "printf hello; exit 4";
  s.env = {"SECRET=do-not-log-me"};
  s.origin = "ses-0123456789ab";
  auto r = runFor(io_, c_->run(s), 30s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(seen->started_.size(), 1u);
  ASSERT_EQ(seen->ended_.size(), 1u);
  const CommandNote& n = seen->ended_[0];
  EXPECT_EQ(n.origin, "ses-0123456789ab");
  EXPECT_EQ(n.argv, (std::vector<std::string>{"/bin/sh", "-c", "printf hello; exit 4"}));
  EXPECT_EQ(n.env_names, std::vector<std::string>{"SECRET"});
  EXPECT_EQ(n.bytes_out, 5u);
  EXPECT_GT(n.pid, 0u);
  EXPECT_EQ(seen->exits[0].code, 4);

  // Detached, then its exit read through an attach: reported there, once.
  std::string gate = dir_ + "/gate";
  ASSERT_EQ(::mkfifo(gate.c_str(), 0666), 0);
  ExecSpec d;
  d.shell = "read x < " + gate + "; exit 5";
  d.user = "root";
  d.origin = "envd";
  auto p = runFor(io_, c_->exec(d));
  ASSERT_TRUE(p.ok());
  uint32_t pid = (*p)->pid();
  p->reset();
  {
    int fd = ::open(gate.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "\n", 1), 1);
    ::close(fd);
  }
  auto q = runFor(io_, c_->attach(pid));
  ASSERT_TRUE(q.ok()) << q.error().message();
  for (;;) {
    auto e = runFor(io_, (*q)->next(), 10s);
    ASSERT_TRUE(e.ok()) << e.error().message();
    if (e->kind == ProcessEvent::Kind::kExit) break;
  }
  ASSERT_EQ(seen->ended_.size(), 2u);
  EXPECT_EQ(seen->ended_[1].origin, "envd");
  EXPECT_EQ(seen->exits[1].code, 5);
  EXPECT_EQ(seen->started_.size(), 2u);
}

}  // namespace
}  // namespace vessel::agentclient
