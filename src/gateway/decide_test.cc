// decide() row by row: every way a guest connection's first bytes can go,
// under an allowlist, a full and a none policy. The rows cite the threat
// classes of ../shared/egress-threats.md they hold the line on; the
// integration suite (tests/integration/egress) runs the same attacks end to
// end.
#include "gateway/decide.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "gateway/name.h"
#include "gateway/tls/hello_builder.h"

namespace vessel::gateway {
namespace {

using Action = Verdict::Action;
using Tier = Verdict::Tier;

policy::Policy policyOf(const char* mode) {
  boost::json::value v = boost::json::parse(std::string(R"({"generation":1,"mode":")") + mode +
                                            R"(","allow":["a.test","*.w.test","p.test:8443",
      "api.a.test","api.a.test:8443","i.test"],
    "credentials":[{"name":"gh","hosts":["api.a.test"],"header":"Authorization",
                    "value":"Bearer s3cr3t-0123456789abcdef"}],
    "inspect":["i.test"]})");
  auto p = policy::Policy::fromJson(v);
  EXPECT_TRUE(p.ok()) << p.error().message();
  return *p;
}

Classified fed(const std::string& bytes, bool then_time_out = false) {
  FirstBytes fb;
  fb.feed(bytes);
  if (then_time_out) fb.timeOut();
  return std::move(fb).take();
}
Classified hello(tls::HelloSpec spec) { return fed(tls::buildClientHello(spec)); }
Classified sni(const char* name) { return hello({.server_names = {name}}); }
Classified http(const std::string& host_lines) {
  return fed("GET / HTTP/1.1\r\n" + host_lines + "\r\n");
}
Classified truncatedHello() {
  std::string h = tls::buildClientHello({.server_names = {"a.test"}});
  return fed(h.substr(0, h.size() / 2), true);
}
Classified badHello() { return fed(std::string("\x16\x03\x01\x00\x05hello", 10)); }
Classified silence() { return fed("", true); }

struct Row {
  const char* what;
  char mode;  // 'a'llowlist, 'f'ull, 'n'one
  Classified first;
  uint16_t port;
  Action action;
  Tier tier;           // when dialling
  const char* name;    // the pinned name (also logged on a deny)
  const char* reason;  // when denying
  bool credential;     // injected (terminate tier)
  // Where the guest sent it: a public address no rule names, unless a row
  // says otherwise.
  const char* destination = "203.0.113.50";
};

constexpr Action kDeny = Action::kDeny, kName = Action::kDialName, kOrig = Action::kDialOriginal;
constexpr Tier kSplice = Tier::kSplice, kHttp = Tier::kHttp, kTerm = Tier::kTerminate;

std::vector<Row> table() {
  return {
      // --- allowlist: TLS ---
      {"sni allowed", 'a', sni("a.test"), 443, kName, kSplice, "a.test", "", false},
      {"sni normalized once (4)", 'a', sni("A.Test."), 443, kName, kSplice, "a.test", "", false},
      {"allowed name, other port (25, 26)", 'a', sni("a.test"), 8443, kDeny, kSplice, "a.test",
       "policy", false},
      {"rule's own port", 'a', sni("p.test"), 8443, kName, kSplice, "p.test", "", false},
      {"rule's own port only", 'a', sni("p.test"), 443, kDeny, kSplice, "p.test", "policy", false},
      {"sni not allowed (6)", 'a', sni("x.test"), 443, kDeny, kSplice, "x.test", "policy", false},
      {"suffix confusion (46)", 'a', sni("evila.test"), 443, kDeny, kSplice, "evila.test", "policy",
       false},
      {"wildcard excludes its apex (46)", 'a', sni("w.test"), 443, kDeny, kSplice, "w.test",
       "policy", false},
      {"wildcard by whole label", 'a', sni("x.w.test"), 443, kName, kSplice, "x.w.test", "", false},
      {"no sni (7)", 'a', hello({}), 443, kDeny, kSplice, "", "no-sni", false},
      {"two sni (22)", 'a', hello({.server_names = {"a.test", "x.test"}}), 443, kDeny, kSplice, "",
       "multiple-sni", false},
      {"ech (3)", 'a', hello({.server_names = {"a.test"}, .ech = true}), 443, kDeny, kSplice, "",
       "ech", false},
      {"ip literal sni (22)", 'a', sni("10.0.0.1"), 443, kDeny, kSplice, "", "bad-sni", false},
      {"percent in sni (49)", 'a', sni("a%2etest"), 443, kDeny, kSplice, "", "bad-sni", false},
      {"credentialed host: terminate and inject (54)", 'a', sni("api.a.test"), 443, kName, kTerm,
       "api.a.test", "", true},
      {"credential only on 443", 'a', sni("api.a.test"), 8443, kName, kSplice, "api.a.test", "",
       false},
      {"inspected host: terminate, no secret (10)", 'a', sni("i.test"), 443, kName, kTerm, "i.test",
       "", false},
      {"partial hello at the deadline", 'a', truncatedHello(), 443, kDeny, kSplice, "",
       "classify-timeout", false},
      {"malformed hello (21, 22)", 'a', badHello(), 443, kDeny, kSplice, "", "bad-client-hello",
       false},
      // --- allowlist: HTTP ---
      {"host allowed", 'a', http("Host: a.test\r\n"), 80, kName, kHttp, "a.test", "", false},
      {"host port equal to the destination", 'a', http("Host: a.test:80\r\n"), 80, kName, kHttp,
       "a.test", "", false},
      {"host port not the destination", 'a', http("Host: a.test:8080\r\n"), 80, kDeny, kHttp,
       "a.test", "host-port-mismatch", false},
      {"host not allowed (8)", 'a', http("Host: x.test\r\n"), 80, kDeny, kHttp, "x.test", "policy",
       false},
      {"plaintext to a credentialed host: no secret (54)", 'a', http("Host: api.a.test\r\n"), 80,
       kName, kHttp, "api.a.test", "", false},
      {"two hosts (16)", 'a', http("Host: a.test\r\nHost: x.test\r\n"), 80, kDeny, kHttp, "",
       "bad-request", false},
      {"userinfo host (16, 49)", 'a', http("Host: a.test@x.test\r\n"), 80, kDeny, kHttp, "",
       "bad-request", false},
      {"absolute-form disagrees with host (12)", 'a',
       fed("GET http://x.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n"), 80, kDeny, kHttp, "",
       "bad-request", false},
      {"head unfinished at the deadline", 'a', fed("GET / HTTP/1.1\r\n", true), 80, kDeny, kHttp,
       "", "classify-timeout", false},
      // --- allowlist: anything else ---
      {"opaque bytes", 'a', fed("ssh-2.0\r\n"), 22, kDeny, kSplice, "", "unparseable", false},
      {"silence", 'a', silence(), 443, kDeny, kSplice, "", "classify-timeout", false},
      // --- full: named flows are still decided by name ---
      {"full: any sni", 'f', sni("x.test"), 443, kName, kSplice, "x.test", "", false},
      {"full: any port", 'f', sni("x.test"), 22, kName, kSplice, "x.test", "", false},
      {"full: ech is spliced", 'f', hello({.server_names = {"x.test"}, .ech = true}), 443, kName,
       kSplice, "x.test", "", false},
      {"full: credential still keyed on sni", 'f', sni("api.a.test"), 443, kName, kTerm,
       "api.a.test", "", true},
      {"full: ip literal sni refused", 'f', sni("10.0.0.1"), 443, kDeny, kSplice, "", "bad-sni",
       false},
      {"full: two sni refused", 'f', hello({.server_names = {"a.test", "x.test"}}), 443, kDeny,
       kSplice, "", "multiple-sni", false},
      {"full: host port mismatch refused", 'f', http("Host: x.test:81\r\n"), 80, kDeny, kHttp,
       "x.test", "host-port-mismatch", false},
      {"full: any host", 'f', http("Host: x.test\r\n"), 80, kName, kHttp, "x.test", "", false},
      // --- full: unnamed flows go to the guest's destination (inward refused by the dial) ---
      {"full: no sni", 'f', hello({}), 443, kOrig, kSplice, "", "", false},
      {"full: opaque", 'f', fed("ssh-2.0\r\n"), 22, kOrig, kSplice, "", "", false},
      {"full: silence", 'f', silence(), 22, kOrig, kSplice, "", "", false},
      {"full: malformed hello", 'f', badHello(), 443, kOrig, kSplice, "", "", false},
      {"full: bad http goes as opaque bytes", 'f', http("Host: a\tx\r\n"), 80, kOrig, kSplice, "",
       "", false},
      {"full: unnamed to an inward address", 'f', hello({}), 443, kDeny, kSplice, "", "inward",
       false, "10.1.2.3"},
      {"full: unnamed to the metadata address", 'f', fed("ssh-2.0\r\n"), 80, kDeny, kSplice, "",
       "inward", false, "169.254.169.254"},
      // --- none: nothing ---
      {"none: tls", 'n', sni("a.test"), 443, kDeny, kSplice, "", "mode-none", false},
      {"none: http", 'n', http("Host: a.test\r\n"), 80, kDeny, kSplice, "", "mode-none", false},
      {"none: opaque", 'n', fed("ssh"), 22, kDeny, kSplice, "", "mode-none", false},
  };
}

TEST(DecideTest, EveryRow) {
  const policy::Policy allowlist = policyOf("allowlist"), full = policyOf("full"),
                       none = policyOf("none");
  const policy::AddressClassifier classes;
  for (const Row& r : table()) {
    const policy::Policy& p = r.mode == 'a' ? allowlist : r.mode == 'f' ? full : none;
    Verdict v = decide(r.first, p, classes, boost::asio::ip::make_address(r.destination), r.port);
    EXPECT_EQ(v.action, r.action) << r.what << " (reason '" << v.reason << "')";
    EXPECT_EQ(v.name, r.name) << r.what;
    if (r.action == kDeny) {
      std::string want = r.reason;
      if (want == "inward") {  // the classifier names the range
        std::string why = classes.refusalReason(boost::asio::ip::make_address(r.destination));
        ASSERT_FALSE(why.empty()) << r.what;
        want = "inward-destination:" + why;
      }
      EXPECT_EQ(v.reason, want) << r.what;
      EXPECT_FALSE(v.credential.has_value()) << r.what;
    } else {
      EXPECT_EQ(v.tier, r.tier) << r.what;
      EXPECT_EQ(v.reason, "") << r.what;
      EXPECT_EQ(v.credential.has_value(), r.credential) << r.what;
      if (v.credential) {
        EXPECT_EQ(v.credential->value, "Bearer s3cr3t-0123456789abcdef") << r.what;
      }
    }
  }
}

TEST(DecideTest, WhatIsDialledByNameIsNormalizedAllowedAndPinned) {
  // Holds whatever rows are added: a name that is dialled is the normalized
  // one, the policy allows it on that port, and a secret rides only on a
  // terminated 443.
  const policy::Policy allowlist = policyOf("allowlist"), full = policyOf("full");
  const policy::AddressClassifier classes;
  for (const Row& r : table()) {
    const policy::Policy& p = r.mode == 'f' ? full : allowlist;
    Verdict v = decide(r.first, p, classes, boost::asio::ip::make_address(r.destination), r.port);
    if (v.action == kName) {
      auto n = normalizeName(v.name);
      ASSERT_TRUE(n.ok()) << r.what;
      EXPECT_EQ(*n, v.name) << r.what;
      EXPECT_TRUE(p.allows(v.name, r.port)) << r.what;
    }
    if (v.action == kOrig) {
      EXPECT_EQ(p.mode, policy::Mode::kFull) << r.what;
    }
    if (v.credential) {
      EXPECT_EQ(v.tier, kTerm) << r.what;
      EXPECT_EQ(r.port, 443) << r.what;
    }
  }
}

TEST(DecideTest, AnAddressRuleLetsUnnamedFlowsThroughAsOpaqueBytes) {
  // Address rules (issue 25) beside the first bytes: whatever names nothing,
  // or hides its name, or names a host no rule allows, goes to an allowed
  // destination as spliced bytes (no Host pin, no credential); not to any
  // other address, and never to an inward one whatever the rule says.
  boost::json::value j = boost::json::parse(R"({"generation":1,"mode":"allowlist",
    "allow":["a.test","203.0.113.7","198.51.100.0/24:5432"],
    "credentials":[{"name":"gh","hosts":["api.a.test"],"header":"Authorization",
                    "value":"Bearer s3cr3t-0123456789abcdef"}]})");
  auto p = policy::Policy::fromJson(j);
  ASSERT_TRUE(p.ok()) << p.error().message();
  const policy::AddressClassifier classes;
  auto at = [&](const Classified& c, const char* dest, uint16_t port) {
    return decide(c, *p, classes, boost::asio::ip::make_address(dest), port);
  };
  struct Case {
    const char* what;
    Classified first;
    const char* dest;
    uint16_t port;
    Action action;
    const char* reason;
  };
  std::vector<Case> cases = {
      {"no sni to an allowed address", hello({}), "203.0.113.7", 443, kOrig, ""},
      {"ech to an allowed address", hello({.server_names = {"x.test"}, .ech = true}), "203.0.113.7",
       443, kOrig, ""},
      {"opaque bytes to an allowed address, any port", fed("ssh-2.0\r\n"), "203.0.113.7", 22, kOrig,
       ""},
      {"silence to an allowed address", silence(), "203.0.113.7", 22, kOrig, ""},
      {"a name no rule allows, to an allowed address", sni("x.test"), "203.0.113.7", 443, kOrig,
       ""},
      {"http for another host, to an allowed address", http("Host: x.test\r\n"), "203.0.113.7", 80,
       kOrig, ""},
      {"an allowed range on its port", fed("pg"), "198.51.100.9", 5432, kOrig, ""},
      {"an allowed range on another port", fed("pg"), "198.51.100.9", 443, kDeny, "unparseable"},
      {"no sni to another address", hello({}), "203.0.113.8", 443, kDeny, "no-sni"},
      {"a name no rule allows, elsewhere", sni("x.test"), "203.0.113.8", 443, kDeny, "policy"},
      {"an allowed name still goes by name", sni("a.test"), "203.0.113.8", 443, kName, ""},
  };
  for (auto& c : cases) {
    Verdict v = at(c.first, c.dest, c.port);
    EXPECT_EQ(v.action, c.action) << c.what << " (reason '" << v.reason << "')";
    if (c.action == kDeny) EXPECT_EQ(v.reason, c.reason) << c.what;
    if (c.action == kOrig) {
      EXPECT_EQ(v.tier, kSplice) << c.what;
      EXPECT_FALSE(v.credential.has_value()) << c.what;
      EXPECT_EQ(v.name, "") << c.what;
    }
  }
  // A credentialed host no name rule allows, sent to an allowed address,
  // goes there as bytes: the name decides nothing, so no secret rides on it.
  Verdict cred = at(sni("api.a.test"), "203.0.113.7", 443);
  EXPECT_EQ(cred.action, kOrig) << cred.reason;
  EXPECT_FALSE(cred.credential.has_value());
  EXPECT_EQ(cred.tier, kSplice);
}

}  // namespace
}  // namespace vessel::gateway
