// Hostile guests (issue 13): real QEMU guests attack from root inside the
// guest, through a real vesseld. Every case asserts the same three things:
// the API keeps answering (GET /healthz and GET of a sandbox each complete
// within a 1 s deadline of their own, during the attack and after it), a
// neighbour sandbox keeps running commands, and once the attacker is
// deleted nothing of it is left on the host (its QEMU, cgroups, jail
// directory, uid lease, network namespace and files). One daemon and one
// neighbour serve every case; docs/threat-model.md ("Hostile guests") has
// what each attack does and what it leaves.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "base/fd.h"
#include "hostile_footprint.h"
#include "http_client.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using testing::Footprint;
using ::testing::HasSubstr;
using testing::HttpStream;
using testing::Reply;
using testing::str;
using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1 << 20;
// The agent's reply deadline of this daemon (--agent-reply-timeout).
constexpr int kReplyTimeoutS = 5;
// How much of the 10 GiB flood is read. Under TCG on these shared machines
// the guest's output reaches the client at 20-60 MiB/s, so all 10 GiB (13.7
// GiB of SSE) would take minutes; what is asserted - vesseld's memory stays
// flat while a guest prints, and the stream neither buffers nor ends early
// - shows in the first hundred MiB, and the guest's dd is still printing
// (it is killed when the reader leaves).
constexpr uint64_t kFloodRead = 512 * kMiB;

class HostileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    // No warm pool: every QEMU of the daemon belongs to a sandbox of a test.
    d_ = new testing::Vesseld(
        VESSELD_PATH, {"--warm-pool", "", "--agent-reply-timeout", std::to_string(kReplyTimeoutS),
                       "--tenant-max-sandboxes", "12"});
    d_->setContract(testing::apiContract());
    if (!d_->start()) {
      ADD_FAILURE() << "vesseld did not come up:\n" << d_->log();
      return;
    }
    std::string why;
    neighbour_ = d_->createSandbox("{}", &why);
    if (neighbour_.empty()) ADD_FAILURE() << "neighbour: " << why;
  }
  static void TearDownTestSuite() {
    if (d_) testing::endSuite(d_);
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "vesseld needs root";
    ASSERT_TRUE(d_ && d_->running() && !neighbour_.empty());
  }

  // One GET with its own deadline: the API must answer within it.
  static Reply getWithin(const std::string& target, bool auth) {
    testing::Request r;
    r.target = target;
    r.bearer = auth ? d_->key() : "";
    r.deadline = 1s;
    return testing::call(d_->port(), r);
  }
  // The API answers within 1 s and the neighbour runs a command.
  static void expectResponsive(const std::string& when) {
    Reply h = getWithin("/healthz", false);
    EXPECT_EQ(h.status, 200) << "GET /healthz did not complete within 1 s " << when;
    EXPECT_TRUE(h.js().is_object()) << "healthz body incomplete " << when;
    Reply g = getWithin("/v1/sandboxes/" + neighbour_, true);
    EXPECT_EQ(g.status, 200) << "GET of a sandbox did not complete within 1 s " << when;
    EXPECT_EQ(str(g.js(), "state"), "running") << when;
    EXPECT_EQ(d_->sh(neighbour_, "echo ok"), "ok\n") << "the neighbour failed a command " << when;
  }

  struct Attacker {
    std::string id, token;
    Footprint fp;
  };
  static Attacker attacker(const std::string& body = "{}") {
    Attacker a;
    std::string why;
    a.id = d_->createSandbox(body, &why);
    EXPECT_FALSE(a.id.empty()) << why;
    if (a.id.empty()) return a;
    a.token = d_->session(a.id);
    a.fp = testing::footprintOf(*d_, a.id);
    EXPECT_TRUE(a.fp.complete()) << a.fp.describe();
    return a;
  }
  // Deletes the attacker; then nothing of it may be left.
  static void deleteAndExpectGone(const Attacker& a) {
    EXPECT_TRUE(d_->deleteSandbox(a.id)) << d_->log();
    testing::expectGone(a.fp);
    expectResponsive("after the attacker is deleted");
  }

  static Reply exec(const std::string& token, const std::string& cmd) {
    json::object o{{"shell", cmd}, {"user", "root"}};
    return d_->data(token, "POST", "/v1/exec", json::serialize(o));
  }
  // Starts `cmd` as root and returns its open exec stream once the command
  // has printed `ready` (or ended): the attack is under way from there.
  static std::unique_ptr<HttpStream> startAttack(const Attacker& a, const std::string& cmd,
                                                 const std::string& ready) {
    testing::Request r;
    r.method = "POST";
    r.target = "/v1/exec";
    r.bearer = a.token;
    r.body = json::serialize(json::object{{"shell", cmd}, {"user", "root"}});
    auto s = HttpStream::open(d_->dataPort(), r);
    if (!s) return s;
    bool up = s->readUntil([&](const std::string& body) {
      auto o = testing::collectExec(body);
      return o.out.find(ready) != std::string::npos || o.exit_code >= 0;
    });
    EXPECT_TRUE(up) << "the attack did not start: " << s->reply().body.substr(0, 2000);
    return s;
  }
  // Uploads the hostile guest tool (hostile_guest_tool.c) to /tmp/h.
  static bool uploadTool(const Attacker& a) {
    auto bin = readFile(HOSTILE_GUEST_TOOL, 8 << 20);
    if (!bin.ok()) return false;
    Reply up = d_->data(a.token, "PUT", "/v1/files?path=/tmp/h&mode=0755", *bin, false);
    return up.status == 201;
  }
  std::string consoleLog(const Attacker& a) {
    auto text = readFile(a.fp.vm_dir + "/console.log", 8 << 20);
    return text.ok() ? *text : "";
  }

  static testing::Vesseld* d_;
  static std::string neighbour_;
};

testing::Vesseld* HostileTest::d_ = nullptr;
std::string HostileTest::neighbour_;

TEST_F(HostileTest, ForkBombStaysInsideItsGuest) {
  Attacker a = attacker();
  ASSERT_FALSE(a.id.empty());
  auto s = startAttack(a, "echo started; b() { b | b & }; b", "started");
  // Under way until the guest is full: its process count passes 500, or its
  // agent can no longer start a command for us (fork fails, or no answer
  // within the reply deadline) - the guest's own business either way.
  // Each probe has 10 s (a guest this busy may never finish the command).
  std::string seen;
  for (int i = 0; i < 30; ++i) {
    testing::Request r;
    r.method = "POST";
    r.target = "/v1/exec";
    r.bearer = a.token;
    r.body = R"({"shell":"ls -d /proc/[0-9]* | wc -l","user":"root"})";
    r.deadline = 10s;
    Reply got = testing::call(d_->dataPort(), r);
    auto out = testing::collectExec(got.body);
    seen = std::to_string(got.status) + " exit " + std::to_string(out.exit_code) + ": " + out.out +
           out.err + (got.status == 200 ? "" : got.body);
    if (got.status != 200 || out.exit_code != 0 || std::atoi(out.out.c_str()) > 500) break;
  }
  std::printf("fork bomb: the attacker's last probe: %s\n", seen.c_str());
  expectResponsive("during a fork bomb");
  expectResponsive("during a fork bomb, again");
  deleteAndExpectGone(a);
}

TEST_F(HostileTest, MemoryHogIsOomKilledInsideItsGuest) {
  Attacker a = attacker();
  ASSERT_FALSE(a.id.empty());
  int64_t host_ooms = testing::hostOomKills(a.fp.memory_cgroup);
  EXPECT_GE(host_ooms, 0) << a.fp.memory_cgroup;
  // One read of 1 GiB from /dev/zero into a buffer of that size: the guest
  // has 256 MiB, so its kernel's OOM killer ends dd. Root first lets the
  // guest's kernel promise any amount (else malloc of 1 GiB fails at once).
  auto s = startAttack(a,
                       "echo 1 > /proc/sys/vm/overcommit_memory; echo started; "
                       "dd if=/dev/zero of=/dev/null bs=1024M count=1",
                       "started");
  expectResponsive("during a memory hog");
  s->readAll();
  auto out = testing::collectExec(s->reply().body);
  EXPECT_EQ(out.exit_code, 137) << out.out << out.err;  // SIGKILL, from the guest's OOM killer
  EXPECT_THAT(d_->sh(a.id, "dmesg | grep -c 'Out of memory: Killed process'"),
              ::testing::Not(HasSubstr("0")));
  // The host never had to step in: QEMU stayed inside its cgroup's limit
  // (guest RAM + overhead), and the guest lives on.
  EXPECT_EQ(testing::hostOomKills(a.fp.memory_cgroup), host_ooms);
  EXPECT_EQ(d_->sh(a.id, "echo alive"), "alive\n");
  deleteAndExpectGone(a);
}

TEST_F(HostileTest, DiskFillHitsOnlyItsOwnCap) {
  Attacker a = attacker(R"({"disk_mib":128})");
  ASSERT_FALSE(a.id.empty());
  uint64_t before = testing::allocatedUnder(d_->root());
  auto s = startAttack(a, "echo started; dd if=/dev/zero of=/home/user/fill bs=1M 2>&1; sync",
                       "started");
  expectResponsive("during a disk fill");
  s->readAll();
  auto out = testing::collectExec(s->reply().body);
  EXPECT_THAT(out.out, HasSubstr("No space left on device"));
  // The host gave it its 128 MiB and no more: its overlay, and everything
  // under the daemon's directories together, grew by at most that.
  uint64_t overlay = testing::allocatedUnder(a.fp.vm_dir);
  uint64_t after = testing::allocatedUnder(d_->root());
  EXPECT_LE(overlay, (128 + 32) * kMiB);
  EXPECT_LE(after, before + (128 + 64) * kMiB) << before << " -> " << after;
  EXPECT_EQ(d_->sh(a.id, "rm /home/user/fill && echo freed"), "freed\n");
  deleteAndExpectGone(a);
}

TEST_F(HostileTest, ConsoleFloodIsCappedOnTheHost) {
  Attacker a = attacker();
  ASSERT_FALSE(a.id.empty());
  // 1.5 times the host's cap, as fast as the guest can: under TCG its
  // console takes a few hundred KiB/s, so more would only cost time.
  auto s = startAttack(a, "echo started; yes flood-flood-flood | head -c 1572864 > /dev/console",
                       "started");
  expectResponsive("during a console flood");
  s->readAll();
  EXPECT_EQ(testing::collectExec(s->reply().body).exit_code, 0) << s->reply().body;
  std::string log = consoleLog(a);
  EXPECT_LE(log.size(), (1u << 20) + 64u) << "the console log is capped at 1 MiB";
  EXPECT_THAT(log, HasSubstr("[vessel: console log truncated here]"));
  EXPECT_EQ(d_->sh(a.id, "echo alive"), "alive\n");
  deleteAndExpectGone(a);
}

TEST_F(HostileTest, CpuSpinInEightSandboxes) {
  std::vector<Attacker> as;
  for (int i = 0; i < 8; ++i) {
    as.push_back(attacker());
    ASSERT_FALSE(as.back().id.empty());
  }
  std::vector<std::unique_ptr<HttpStream>> spins;
  for (const auto& a : as)
    spins.push_back(startAttack(a, "echo spinning; while :; do :; done", "spinning"));
  expectResponsive("while 8 sandboxes spin");
  // Their streams close: vesseld kills what they ran.
  spins.clear();
  for (const auto& a : as) deleteAndExpectGone(a);
}

TEST_F(HostileTest, GarbageOnTheAgentChannelFailsOnlyThatSandbox) {
  Attacker a = attacker();
  ASSERT_FALSE(a.id.empty());
  ASSERT_TRUE(uploadTool(a));
  // Subscribed before the attack: the event that says the sandbox failed.
  testing::Request sub;
  sub.target = "/v1/events";
  sub.bearer = d_->key();
  auto events = HttpStream::open(d_->port(), sub);
  ASSERT_TRUE(events && events->readUntil([](const std::string&) { return true; }));
  auto failed = [&](const std::string& body, std::string* error) {
    for (auto& e : testing::parseSse(body))
      if (e.type == "sandbox.state" && str(e.data, "id") == a.id &&
          str(e.data, "state") == "failed") {
        if (error) *error = str(e.data, "error");
        return true;
      }
    return false;
  };
  // The guest writes 1 MiB of random bytes into its agent's channel.
  Reply r = exec(a.token, "/tmp/h garbage 1048576");
  std::string error;
  EXPECT_TRUE(events->readUntil([&](const std::string& b) { return failed(b, nullptr); }));
  failed(events->reply().body, &error);
  expectResponsive("after garbage on an agent channel");
  EXPECT_THAT(error, HasSubstr("agent channel failed")) << events->reply().body << "\n" << r.body;
  Reply got = d_->call("GET", "/v1/sandboxes/" + a.id);
  EXPECT_EQ(str(got.js(), "state"), "failed");
  EXPECT_TRUE(d_->running()) << "vesseld itself died";
  deleteAndExpectGone(a);
}

TEST_F(HostileTest, StoppedAgentTimesOutExecsAndDeleteWorks) {
  Attacker a = attacker();
  ASSERT_FALSE(a.id.empty());
  ASSERT_TRUE(uploadTool(a));
  // The tool returns at once; what it leaves stops PID 1 with ptrace and
  // says so on the console, the one channel left.
  Reply r = exec(a.token, "/tmp/h stop-agent");
  EXPECT_THAT(testing::collectExec(r.body).out, HasSubstr("stopping the agent")) << r.body;
  bool stopped = false;
  for (int i = 0; i < 300 && !stopped; ++i) {
    stopped = consoleLog(a).find("agent stopped (") != std::string::npos;
    if (!stopped) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(stopped) << consoleLog(a);
  Reply x = exec(a.token, "echo hi");
  EXPECT_EQ(x.status, 504) << x.body;
  EXPECT_THAT(x.body, HasSubstr("did not answer Exec within " +
                                std::to_string(kReplyTimeoutS * 1000) + " ms"));
  expectResponsive("while an agent is stopped");
  EXPECT_EQ(str(d_->call("GET", "/v1/sandboxes/" + a.id).js(), "state"), "running");
  deleteAndExpectGone(a);
}

// A gateway that stops answering (SIGSTOP of the real vessel-gateway) while
// a delete and a create wait for it (their policy removal and registration):
// those two wait, up to the control call's 5 s timeout each, and no one
// else does. Until both have ended, GET /healthz and the neighbour's GET
// answer within 1 s each, round after round, and the neighbour runs a
// command; the create fails with the gateway's error (no sandbox runs
// without its policy), the delete completes. Once the gateway runs again,
// creates work again.
TEST_F(HostileTest, StalledGatewayHoldsOnlyTheCallsThatNeedIt) {
  Reply h = getWithin("/healthz", false);
  ASSERT_EQ(h.status, 200) << h.body;
  json::value health = h.js();
  const json::value* gw = health.is_object() ? health.as_object().if_contains("gateway") : nullptr;
  ASSERT_TRUE(gw && gw->is_object()) << "this daemon runs without egress: " << h.body;
  pid_t gateway = static_cast<pid_t>(gw->at("pid").to_number<int64_t>());
  ASSERT_GT(gateway, 0) << h.body;
  std::string why;
  std::string victim = d_->createSandbox("{}", &why);
  ASSERT_FALSE(victim.empty()) << why;

  ASSERT_EQ(::kill(gateway, SIGSTOP), 0);
  struct Resume {
    pid_t pid;
    ~Resume() { ::kill(pid, SIGCONT); }
  } resume{gateway};
  Reply del = d_->call("DELETE", "/v1/sandboxes/" + victim);
  ASSERT_EQ(del.status, 202) << del.body;
  Reply made = d_->call("POST", "/v1/sandboxes", "{}");
  ASSERT_EQ(made.status, 202) << made.body;
  std::string created = str(made.js().at("sandbox"), "id");
  // Followed to their ends on threads of their own (SSE), while this one
  // probes the API.
  auto deleted = std::async(std::launch::async,
                            [op = str(del.js().at("operation"), "id")] { return d_->finish(op); });
  auto create = std::async(std::launch::async,
                           [op = str(made.js().at("operation"), "id")] { return d_->finish(op); });
  int rounds = 0;
  auto over = [](std::future<std::string>& f) {
    return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  };
  while (!over(deleted) || !over(create)) {
    std::string when = "while the gateway is stopped (round " + std::to_string(rounds) + ")";
    // 503 is the truth here (the gateway does not answer); what counts is
    // that the answer comes.
    Reply hz = getWithin("/healthz", false);
    EXPECT_THAT(hz.status, ::testing::AnyOf(200, 503))
        << "GET /healthz did not complete within 1 s " << when;
    EXPECT_TRUE(hz.js().is_object()) << "healthz body incomplete " << when;
    Reply g = getWithin("/v1/sandboxes/" + neighbour_, true);
    EXPECT_EQ(g.status, 200) << "GET of a sandbox did not complete within 1 s " << when;
    if (HasFailure()) break;
    ++rounds;
  }
  // Not in the loop: a call without a deadline of its own would sit out a
  // stalled io thread unnoticed, and the probes after it would miss it.
  EXPECT_EQ(d_->sh(neighbour_, "echo ok"), "ok\n") << "the neighbour failed a command";
  std::string del_state = deleted.get(), create_state = create.get();
  EXPECT_GT(rounds, 0);
  EXPECT_EQ(del_state, "done");
  EXPECT_EQ(create_state, "failed");
  Reply c = d_->call("GET", "/v1/sandboxes/" + created);
  EXPECT_EQ(str(c.js(), "state"), "failed") << c.body;
  EXPECT_THAT(str(c.js(), "error"), HasSubstr("gateway")) << c.body;
  EXPECT_EQ(d_->call("GET", "/v1/sandboxes/" + victim).status, 404);

  ::kill(gateway, SIGCONT);
  std::string again = d_->createSandbox("{}", &why);
  EXPECT_FALSE(again.empty()) << "a create once the gateway answers again: " << why;
  if (!again.empty()) EXPECT_TRUE(d_->deleteSandbox(again));
  EXPECT_TRUE(d_->deleteSandbox(created));
  // Healthy again: the node reconnects to the gateway on its own.
  expectResponsive("after the gateway runs again");
}

// What vesseld does with a guest that prints without end: the exec stream
// is throttled to its reader (the agent protocol's per-stream credit, a
// bounded queue between the agent client and the HTTP stream, and the
// socket's own buffer), never buffered and never cut for its size; a reader
// that stops holds the guest's writer; a reader that goes away kills it.
TEST_F(HostileTest, TenGibOfOutputKeepsVesseldBounded) {
  Attacker a = attacker();
  ASSERT_FALSE(a.id.empty());
  uint64_t rss0 = testing::rssKib(d_->pid());
  ASSERT_GT(rss0, 0u);
  testing::Request r;
  r.method = "POST";
  r.target = "/v1/exec";
  r.bearer = a.token;
  r.body = json::serialize(json::object{
      {"shell", "dd if=/dev/zero bs=1048576 count=10240 2>/dev/null"}, {"user", "root"}});
  auto s = HttpStream::open(d_->dataPort(), r);
  ASSERT_TRUE(s);
  // 10 GiB of output is about 13.7 GiB of SSE (base64). Read kFloodRead of
  // it at full speed (see kFloodRead for why not all under TCG).
  uint64_t peak = rss0, next_sample = 0;
  auto t0 = std::chrono::steady_clock::now();
  uint64_t got = s->discardBody(kFloodRead, [&](uint64_t total) {
    if (total < next_sample) return;
    next_sample = total + 32 * kMiB;
    peak = std::max(peak, testing::rssKib(d_->pid()));
  });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s->reply().status, 200);
  EXPECT_EQ(got, kFloodRead) << "the stream ended early: " << s->reply().body;
  std::printf("output flood: %.0f MiB of SSE in %.1f s (%.0f MiB/s)\n", got / double(kMiB), secs,
              got / double(kMiB) / secs);
  expectResponsive("during a 10 GiB output flood");
  // The reader stops: everything between the guest and the socket fills
  // and stops. vesseld must not buffer the rest meanwhile.
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(100ms);
    peak = std::max(peak, testing::rssKib(d_->pid()));
  }
  std::printf("vesseld RSS: %lu KiB before, %lu KiB at most during the flood\n",
              static_cast<unsigned long>(rss0), static_cast<unsigned long>(peak));
  EXPECT_LT(peak, rss0 + 256 * 1024) << "vesseld buffered a guest's output";
  // The reader goes away: the command goes with it.
  s->close();
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    Reply ps = d_->data(a.token, "GET", "/v1/processes");
    json::value v = ps.js();  // finished processes stay listed until reaped
    gone = ps.status == 200 && v.is_object();
    if (gone)
      for (const auto& p : v.at("processes").as_array())
        if (p.at("running").as_bool()) gone = false;
    if (!gone) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(gone) << "the flood outlived its reader: "
                    << d_->data(a.token, "GET", "/v1/processes").body;
  EXPECT_EQ(d_->sh(a.id, "echo alive"), "alive\n");
  deleteAndExpectGone(a);
}

}  // namespace
}  // namespace vessel
