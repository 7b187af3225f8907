// The HTTP relay against a fake internet, from a root guest behind a real
// slot: requests an upstream could read differently from the gateway
// (upgrades the upstream never accepted, bodies on GET, early answers,
// loose chunk lines and trailers, TRACE), and the scrubber against every
// encoding an upstream may echo a secret in. Every denied case asserts the
// gateway's own verdict for it (its counter of that reason), then that the
// attacker saw nothing: a case whose command never ran, or whose gateway was
// down, fails.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "tests/integration/egress/world.h"

namespace vessel::egress_test {
namespace {

namespace json = boost::json;

// '/', '+' and '&' make the JSON and percent forms differ from the raw one.
constexpr const char* kSecret = "sk-live/SECRET+0123&456789";

json::value policy(uint64_t gen) {
  json::value p = allowlist(gen, {"a.test", "api.a.test", "a2.test"});
  p.as_object()["credentials"] =
      json::array{json::object{{"name", "api"},
                               {"hosts", json::array{"api.a.test"}},
                               {"header", "Authorization"},
                               {"value", std::string("Bearer ") + kSecret}}};
  return p;
}

// The CDN (a2.test's address) serves x2.test too: a request for x2.test that
// reaches it unchecked is logged as the attacker's.
const std::string kSmuggled = "GET /smuggled HTTP/1.1\r\nHost: x2.test\r\n\r\n";

std::string escaped(std::string s) {
  std::string out;
  for (char c : s) out += c == '\r' ? "\\r" : c == '\n' ? "\\n" : std::string(1, c);
  return out;
}

class EgressRelayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    auto w = EgressWorld::create();
    if (!w.ok()) {
      setup_error_ = new std::string(w.error().message());
      return;
    }
    world_ = w->release();
    auto g = world_->addGuest("sb-relay", policy(1));
    if (!g.ok()) {
      setup_error_ = new std::string(g.error().message());
      return;
    }
    guest_ = *g;
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
    ASSERT_TRUE(world_->setPolicy(*guest_, policy(++generation_)).ok());
    world_->clearLogs();
  }
  void TearDown() override {
    if (HasFailure() && world_) {
      std::string log = world_->gatewayLog();
      std::cerr << "--- gateway log (tail) ---\n"
                << log.substr(log.size() > 3000 ? log.size() - 3000 : 0) << "\n";
    }
  }
  // Sends `bytes` on one TCP connection to the CDN's port 80 and expects the
  // gateway to record a tcp deny with `reason`, and the attacker nothing.
  void expectDenied(const std::string& bytes, const std::string& reason) {
    std::string counter = "tcp_deny_" + reason;
    int64_t before = world_->counter(counter);
    ASSERT_GE(before, 0) << "gateway not answering";
    std::string out = world_->guestTool(*guest_, {"tcp", kCdn, "80", escaped(bytes)});
    EXPECT_TRUE(world_->waitForCounter(counter, before))
        << "no '" << reason << "' verdict for " << escaped(bytes) << "\nguest saw: " << out;
    EXPECT_EQ(world_->attackerLogNow(), "") << "guest saw: " << out;
  }

  static EgressWorld* world_;
  static Guest* guest_;
  static std::string* setup_error_;
  static uint64_t generation_;
};

EgressWorld* EgressRelayTest::world_ = nullptr;
Guest* EgressRelayTest::guest_ = nullptr;
std::string* EgressRelayTest::setup_error_ = nullptr;
uint64_t EgressRelayTest::generation_ = 1;

TEST_F(EgressRelayTest, PositiveControlSmuggledRequestReachesTheAttackerUnfiltered) {
  // The same bytes from the gateway's namespace (no gateway in the way)
  // reach the CDN as two requests: the second is logged as the attacker's.
  std::string out = world_->runIn(
      world_->gwNetns(), {"python3", VESSEL_EGRESS_DIR "/guest_tool.py", "tcp", kCdn, "80",
                          escaped("GET / HTTP/1.1\r\nHost: a2.test\r\n"
                                  "Content-Length: " +
                                  std::to_string(kSmuggled.size()) + "\r\n\r\n" + kSmuggled)});
  EXPECT_NE(world_->attackerLog().find("x2.test /smuggled"), std::string::npos) << out;
}

TEST_F(EgressRelayTest, UpgradeHeaderAloneDoesNotEndHostChecking) {
  expectDenied("GET / HTTP/1.1\r\nHost: a2.test\r\nUpgrade: websocket\r\n\r\n" + kSmuggled,
               "host-mismatch");
}

TEST_F(EgressRelayTest, UpgradeTheUpstreamDidNotAcceptDoesNotEndHostChecking) {
  // Well-formed, but the CDN answers 200: the connection stays HTTP.
  expectDenied(
      "GET / HTTP/1.1\r\nHost: a2.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" +
          kSmuggled,
      "host-mismatch");
}

TEST_F(EgressRelayTest, BodyOnGetIsRefused) {
  expectDenied("GET / HTTP/1.1\r\nHost: a2.test\r\nContent-Length: " +
                   std::to_string(kSmuggled.size()) + "\r\n\r\n" + kSmuggled,
               "bad-request");
}

TEST_F(EgressRelayTest, TraceIsRefused) {
  expectDenied("TRACE / HTTP/1.1\r\nHost: a2.test\r\n\r\n", "bad-request");
}

TEST_F(EgressRelayTest, BareCrInAChunkLineIsRefused) {
  expectDenied(
      "POST / HTTP/1.1\r\nHost: a2.test\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;a\rb\r\nhello\r\n0\r\n\r\n",
      "bad-request");
}

TEST_F(EgressRelayTest, RoutingFieldInTrailersIsRefused) {
  expectDenied(
      "POST / HTTP/1.1\r\nHost: a2.test\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n0\r\nHost: x2.test\r\n\r\n",
      "bad-request");
}

TEST_F(EgressRelayTest, EarlyAnswerToAnExpectContinueRequestEndsTheConnection) {
  // /early answers 401 on the head and never reads the body; the guest sends
  // a request as that "body" at once. Forwarded, it would be the CDN's next
  // request; the gateway holds the body until the upstream asks for it.
  expectDenied(
      "POST /early HTTP/1.1\r\nHost: a2.test\r\nExpect: 100-continue\r\n"
      "Content-Length: " +
          std::to_string(kSmuggled.size()) + "\r\n\r\n" + kSmuggled,
      "early-response");
}

TEST_F(EgressRelayTest, ExpectContinueStillDeliversTheBody) {
  std::string out = world_->curl(*guest_, {"-H", "Expect: 100-continue", "--data-binary",
                                           "payload-after-continue", "http://a.test/echo"});
  EXPECT_NE(out.find("payload-after-continue"), std::string::npos) << out;
}

TEST_F(EgressRelayTest, SecretIsScrubbedInEveryEncodingAndAcrossChunks) {
  // The guest offers gzip and the origin would compress, chunk the body in
  // 7-byte pieces (splitting the secret) and echo it raw, in base64 and
  // base64url at all three alignments, JSON-escaped and percent-encoded in
  // both cases. The guest decodes every line; the secret must be in none.
  std::string out =
      world_->guestTool(*guest_, {"reflect", "https://api.a.test/reflect", world_->guestTrust()});
  for (const char* label : {"raw =", "b64-0 =", "b64-1 =", "b64-2 =", "b64url-0 =", "b64url-1 =",
                            "b64url-2 =", "json =", "pct-upper =", "pct-lower ="}) {
    EXPECT_NE(out.find(label), std::string::npos) << label << " missing: " << out;
  }
  EXPECT_EQ(out.find(kSecret), std::string::npos) << out;
  EXPECT_NE(out.find("****"), std::string::npos) << out;
  // And the upstream did receive the real secret (the check is not vacuous).
  EXPECT_NE(world_->apiLog().find(std::string("Bearer ") + kSecret), std::string::npos);
}

TEST_F(EgressRelayTest, ChangedCredentialResetsConnectionsCarryingTheOldValue) {
  // A keep-alive terminated connection that has injected the secret; then
  // the credential's value changes (what vesseld sends on POST/DELETE
  // /v1/credentials). The gateway resets that connection before it answers.
  std::string script =
      "import socket,ssl,sys\n"
      "ctx=ssl.create_default_context(cafile=sys.argv[2])\n"
      "s=ctx.wrap_socket(socket.create_connection(('api.a.test',443),timeout=20),"
      "server_hostname='api.a.test')\n"
      "s.sendall(b'GET /echo HTTP/1.1\\r\\nHost: api.a.test\\r\\n\\r\\n')\n"
      "print('first', s.recv(4096)[:12], flush=True)\n"
      "open(sys.argv[1],'w').write('open')\n"
      "try:\n"
      "  while s.recv(4096):\n"
      "    pass\n"
      "  print('closed', flush=True)\n"
      "except (ConnectionResetError, ssl.SSLError, OSError) as e:\n"
      "  print('reset', type(e).__name__, flush=True)\n"
      "except socket.timeout:\n"
      "  print('still-open', flush=True)\n";
  std::string flag = world_->dir() + "/revoke.flag";
  std::string out;
  std::thread client([&] {
    out = world_->guestRun(*guest_, {"python3", "-c", script, flag, world_->guestTrust()});
  });
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join{client};
  for (int i = 0; i < 400 && ::access(flag.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(::access(flag.c_str(), F_OK), 0) << "the connection never opened";
  int64_t before = world_->counter("tcp_deny_policy-changed");
  json::value p = policy(++generation_);
  p.as_object()["credentials"].as_array()[0].as_object()["value"] =
      "Bearer rotated-0123456789abcdef";
  ASSERT_TRUE(world_->setPolicy(*guest_, p).ok());
  // The reset happened before the control call returned.
  EXPECT_GT(world_->counter("tcp_deny_policy-changed"), before);
  client.join();
  EXPECT_NE(out.find("first b'HTTP/1.1 200'"), std::string::npos) << out;
  EXPECT_TRUE(out.find("reset") != std::string::npos || out.find("closed") != std::string::npos)
      << out;
}

}  // namespace
}  // namespace vessel::egress_test
