// E2B request bodies and queries -> typed requests, with the bodies the
// `e2b` npm package sends (2.45 v1, 2.51 v2) and what has no mapping.
#include "e2b/requests.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "e2b/rest.h"

namespace vessel::e2b {
namespace {

using store::SandboxState;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(NewSandbox, TheSdksBodyBecomesALifetimeEnvAndMetadata) {
  // What Sandbox.create({metadata, envs, timeoutMs: 60_000}) sends with SDK 2.45.
  auto r = parseNewSandbox(
      R"({"templateID":"base","metadata":{"owner":"me"},"envVars":{"A":"1"},"timeout":60,
          "secure":true,"allow_internet_access":true})",
      false);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->template_id, "base");
  EXPECT_EQ(r->timeout_s, 60);
  EXPECT_EQ(r->metadata.at("owner"), "me");
  EXPECT_THAT(r->env, ElementsAre("A=1"));
  ASSERT_TRUE(r->egress.has_value());
  EXPECT_EQ(r->egress->spec.mode, "full");
  // v2 defaults the timeout to 300 s and has no `secure`.
  auto v2 = parseNewSandbox(R"({"templateID":"base"})", true);
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->timeout_s, 300);
  EXPECT_FALSE(v2->egress.has_value());
  EXPECT_FALSE(parseNewSandbox(R"({"templateID":"base","secure":true})", true).ok());
  EXPECT_THAT(parseNewSandbox(R"({"timeout":5})", false).error().message(),
              HasSubstr("templateID"));
  EXPECT_FALSE(parseNewSandbox(R"({"templateID":"base","envVars":{"1A":"x"}})", false).ok());
  EXPECT_FALSE(parseNewSandbox(R"({"templateID":"base","envVars":{"A=B":"x"}})", false).ok());
  EXPECT_FALSE(parseNewSandbox(R"({"templateID":"base","envVars":{"A":"x\u0000y"}})", false).ok());
  // Metadata values are not environment: NUL is no concern there.
  EXPECT_TRUE(parseNewSandbox(R"({"templateID":"base","metadata":{"a-b":"x"}})", false).ok());
  EXPECT_FALSE(parseNewSandbox(R"({"templateID":"base","timeout":-1})", false).ok());
}

TEST(NewSandbox, InternetOffAndAllowOutBecomeAnAllowlist) {
  auto off = parseNewSandbox(R"({"templateID":"base","allow_internet_access":false})", true);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->egress->spec.mode, "allowlist");
  EXPECT_TRUE(off->egress->spec.allow.empty());
  auto allow = parseNewSandbox(R"({"templateID":"base","network":{
      "allowOut":["example.com","*.pypi.org"],"denyOut":["0.0.0.0/0"]}})",
                               true);
  ASSERT_TRUE(allow.ok()) << allow.error().message();
  EXPECT_EQ(allow->egress->spec.mode, "allowlist");
  EXPECT_THAT(allow->egress->spec.allow, ElementsAre("example.com", "*.pypi.org"));
  // allowOut alone denies nothing: everything stays allowed.
  auto only = parseNewSandbox(R"({"templateID":"base","network":{"allowOut":["a.com"]}})", true);
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->egress->spec.mode, "full");
  // Allowing all traffic wins over denying it.
  auto all = parseNewSandbox(
      R"({"templateID":"base","allow_internet_access":false,"network":{"allowOut":["0.0.0.0/0"]}})",
      true);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->egress->spec.mode, "full");
}

// E2B's network tests (packages/js-sdk/tests/sandbox/network.test.ts at
// e2b@2.45.0): allow one IP with everything else denied, deny one IP,
// allowed entries winning over denied ones, omitted fields clearing all.
TEST(NewSandbox, IpAndCidrRulesBecomePolicy) {
  auto one = parseNewSandbox(
      R"({"templateID":"base","network":{"allowOut":["1.1.1.1","a.com"],"denyOut":["0.0.0.0/0"]}})",
      true);
  ASSERT_TRUE(one.ok()) << one.error().message();
  EXPECT_EQ(one->egress->spec.mode, "allowlist");
  EXPECT_THAT(one->egress->spec.allow, ElementsAre("1.1.1.1", "a.com"));
  EXPECT_TRUE(one->egress->spec.deny.empty());
  auto deny = parseNewSandbox(R"({"templateID":"base","network":{"denyOut":["8.8.8.8"]}})", true);
  ASSERT_TRUE(deny.ok()) << deny.error().message();
  EXPECT_EQ(deny->egress->spec.mode, "full");
  EXPECT_THAT(deny->egress->spec.deny, ElementsAre("8.8.8.8"));
  // Allowed addresses are exceptions to the denied ranges; names are
  // allowed anyway in full mode and add nothing.
  auto both = parseNewSandbox(R"({"templateID":"base","network":{
      "allowOut":["8.8.8.8","[2001:db8::1]:443","a.com"],"denyOut":["8.8.8.0/24","2001:db8::/32"]}})",
                              true);
  ASSERT_TRUE(both.ok()) << both.error().message();
  EXPECT_EQ(both->egress->spec.mode, "full");
  EXPECT_THAT(both->egress->spec.allow, ElementsAre("8.8.8.8", "[2001:db8::1]:443"));
  EXPECT_THAT(both->egress->spec.deny, ElementsAre("8.8.8.0/24", "2001:db8::/32"));
  // Allowing all traffic wins over every deny.
  auto all = parseNewSandbox(
      R"({"templateID":"base","network":{"allowOut":["0.0.0.0/0"],"denyOut":["8.8.8.8"]}})", true);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->egress->spec.mode, "full");
  EXPECT_TRUE(all->egress->spec.deny.empty());
  auto update = parseNetworkUpdate(R"({"denyOut":["10.0.0.0/8"]})");
  ASSERT_TRUE(update.ok()) << update.error().message();
  EXPECT_THAT(update->spec.deny, ElementsAre("10.0.0.0/8"));
  // Bounded, strict forms at the edge: bad ranges, names in denyOut, ports
  // on deny entries, non-canonical IPv4.
  for (const char* body : {
           R"({"templateID":"base","network":{"denyOut":["example.com"]}})",
           R"({"templateID":"base","network":{"denyOut":["1.2.3.4/33"]}})",
           R"({"templateID":"base","network":{"denyOut":["1.2.3.4:80"]}})",
           R"({"templateID":"base","network":{"allowOut":["127.1"],"denyOut":["0.0.0.0/0"]}})",
           R"({"templateID":"base","network":{"allowOut":["2001:db8::/129"]}})",
           R"({"templateID":"base","network":{"allowOut":["fe80::1%eth0"]}})",
           R"({"templateID":"base","network":{"allowOut":["1.2.3.4/8/8"]}})",
       }) {
    auto r = parseNewSandbox(body, true);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  }
}

TEST(NewSandbox, WhatHasNoMappingIsRefusedSayingSo) {
  for (const char* body : {
           R"({"templateID":"base","network":{"egressProxy":{"address":"p:1"}}})",
           R"({"templateID":"base","iam":{"tokens":{"t":{"audience":"a","tokenType":"jwt"}}}})",
           R"({"templateID":"base","network":{"rules":{"a.com":[{"transform":{"path":"/x"}}]}}})",
       }) {
    auto r = parseNewSandbox(body, true);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
    EXPECT_THAT(r.error().message(), HasSubstr("no mapping")) << body;
  }
  // The SDK starts an MCP gateway itself: accepted.
  EXPECT_TRUE(parseNewSandbox(R"({"templateID":"base","mcp":{"srv":{}}})", true).ok());
  // Unset or empty versions of the same are fine (the SDK sends some of them).
  EXPECT_TRUE(parseNewSandbox(
                  R"({"templateID":"base","volumeMounts":[],"autoPause":false,"iam":null})", true)
                  .ok());
}

// E2B's lifecycle as the SDK sends it: autoPause, autoPauseMemory,
// autoResume {enabled}; E2B's combination rules are checked here too.
TEST(NewSandbox, LifecycleFields) {
  auto none = parseNewSandbox(R"({"templateID":"base"})", false);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->auto_pause);
  EXPECT_TRUE(none->auto_pause_memory);
  EXPECT_FALSE(none->auto_resume);
  auto p = parseNewSandbox(
      R"({"templateID":"base","autoPause":true,"autoResume":{"enabled":true}})", false);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->auto_pause);
  EXPECT_TRUE(p->auto_pause_memory);
  EXPECT_TRUE(p->auto_resume);
  auto fs =
      parseNewSandbox(R"({"templateID":"base","autoPause":true,"autoPauseMemory":false})", true);
  ASSERT_TRUE(fs.ok()) << fs.error().message();
  EXPECT_FALSE(fs->auto_pause_memory);
  EXPECT_FALSE(fs->auto_resume);
  for (const char* body : {
           R"({"templateID":"base","autoPause":false,"autoResume":{"enabled":true}})",
           R"({"templateID":"base","autoPauseMemory":false})",
           R"({"templateID":"base","autoPause":true,"autoPauseMemory":false,)"
           R"("autoResume":{"enabled":true}})",
           R"({"templateID":"base","autoPause":"yes"})",
           R"({"templateID":"base","autoPause":true,"autoResume":true})",
           R"({"templateID":"base","autoPause":true,"autoResume":{"enabled":1}})",
       }) {
    auto r = parseNewSandbox(body, false);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << body;
  }
}

TEST(NewSandbox, IngressSettingsForSandboxPorts) {
  auto d = parseNewSandbox(R"({"templateID":"base"})", true);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->ingress, Ingress{});
  auto r = parseNewSandbox(
      R"({"templateID":"base","network":{"allowPublicTraffic":false,"maskRequestHost":"h.example:${PORT}"}})",
      true);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_FALSE(r->ingress.public_traffic);
  EXPECT_EQ(r->ingress.mask_host, "h.example:${PORT}");
  // Ingress settings alone leave the egress to the node's default.
  EXPECT_FALSE(r->egress.has_value());
  auto both = parseNewSandbox(
      R"({"templateID":"base","network":{"allowPublicTraffic":true,"allowOut":["a.com"]}})", true);
  ASSERT_TRUE(both.ok());
  EXPECT_TRUE(both->egress.has_value());
  EXPECT_TRUE(both->ingress.public_traffic);
  for (const char* body : {
           R"({"templateID":"base","network":{"maskRequestHost":"a b"}})",
           R"({"templateID":"base","network":{"maskRequestHost":"a
X-Injected: 1"}})",
           R"({"templateID":"base","network":{"maskRequestHost":7}})",
           R"({"templateID":"base","network":{"allowPublicTraffic":"no"}})",
       })
    EXPECT_FALSE(parseNewSandbox(body, true).ok()) << body;
  EXPECT_FALSE(parseNewSandbox(R"({"templateID":"base","network":{"maskRequestHost":")" +
                                   std::string(256, 'h') + R"("}})",
                               true)
                   .ok());
}

TEST(NewSandbox, HeaderRulesCarryHostHeaderAndValue) {
  auto r = parseNewSandbox(R"({"templateID":"base","network":{"rules":{
      "api.example.com":[{"transform":{"headers":{"Authorization":"Bearer ${e2b.secrets.tok}"}}},{}]}}})",
                           true);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->egress->headers.size(), 1u);
  EXPECT_EQ(r->egress->headers[0].host, "api.example.com");
  EXPECT_EQ(r->egress->headers[0].header, "Authorization");
  auto expanded =
      expandSecrets(r->egress->headers[0].value, [](const std::string& n) -> Result<std::string> {
        if (n == "tok") return std::string("s3cret");
        return Error(Code::kNotFound, n);
      });
  ASSERT_TRUE(expanded.ok());
  EXPECT_EQ(*expanded, "Bearer s3cret");
  // Headers that decide framing or routing are never injected.
  for (const char* h :
       {"Host", "Content-Length", "Transfer-Encoding", "Proxy-Authorization", "a b"})
    EXPECT_FALSE(
        parseNewSandbox(
            std::string(
                R"({"templateID":"base","network":{"rules":{"a.com":[{"transform":{"headers":{")") +
                h + R"(":"v"}}}]}}})",
            true)
            .ok())
        << h;
  auto none = [](const std::string& n) -> Result<std::string> { return Error(Code::kNotFound, n); };
  EXPECT_EQ(expandSecrets("x ${e2b.secrets.gone}", none).error().code(), Code::kNotFound);
  EXPECT_EQ(expandSecrets("x ${e2b.secrets.open", none).error().code(), Code::kInvalidArgument);
  EXPECT_EQ(expandSecrets("plain", none).value_or("?"), "plain");
}

TEST(SmallBodies, ConnectTimeoutPauseForkSnapshotSecret) {
  EXPECT_EQ(parseConnect(R"({"timeout":120})", false).value_or(-1), 120);
  EXPECT_FALSE(parseConnect("{}", false).ok());  // v1 requires the timeout
  EXPECT_EQ(parseConnect("{}", true).value_or(-1), 300);
  EXPECT_EQ(parseConnect("", true).value_or(-1), 300);
  EXPECT_THAT(parseConnect(R"({"timeout":5,"memory":false})", true).error().message(),
              HasSubstr("no mapping"));
  EXPECT_EQ(parseTimeout(R"({"timeout":0})").value_or(-1), 0);
  EXPECT_FALSE(parseTimeout("{}").ok());
  EXPECT_EQ(parseRefresh("").value_or(-1), 15);
  EXPECT_FALSE(parseRefresh(R"({"duration":3601})").ok());
  EXPECT_TRUE(parsePause(R"({"memory":true})").value_or(false));
  EXPECT_TRUE(parsePause("").value_or(false));
  auto fs_only = parsePause(R"({"memory":false})");  // a filesystem-only pause
  ASSERT_TRUE(fs_only.ok());
  EXPECT_FALSE(*fs_only);
  EXPECT_FALSE(parsePause(R"({"memory":"no"})").ok());
  auto f = parseFork(R"({"timeout":30,"count":3})");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->count, 3);
  EXPECT_EQ(f->timeout_s.value_or(-1), 30);
  EXPECT_FALSE(parseFork(R"({"count":17})").ok());
  EXPECT_EQ(parseSnapshot("{}").value_or("?"), "");
  EXPECT_EQ(parseSnapshot(R"({"name":"warm-1"})").value_or("?"), "warm-1");
  EXPECT_FALSE(parseSnapshot(R"({"name":"a/b"})").ok());
  auto s = parseSecret(R"({"name":"gh_token","value":"v-0123456789abcdef"})", true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->name, "gh_token");
  EXPECT_FALSE(parseSecret(R"({"name":"a b","value":"v-0123456789abcdef"})", true).ok());
  EXPECT_FALSE(parseSecret(R"({"name":"a","value":"line\nbreak-0123456789"})", true).ok());
  EXPECT_FALSE(parseSecret(R"({"value":"v-0123456789abcdef"})", true).ok());
  EXPECT_TRUE(parseSecret(R"({"value":"v-0123456789abcdef"})", false).ok());
  // Under 16 bytes: refused as the native API refuses it.
  EXPECT_FALSE(parseSecret(R"({"name":"gh_token","value":"0123456789abcde"})", true).ok());
}

TEST(NetworkUpdate, ReplacesTheWholePolicy) {
  auto r = parseNetworkUpdate(R"({"allow_internet_access":false,"allowOut":["example.com"]})");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->spec.mode, "allowlist");
  EXPECT_THAT(r->spec.allow, ElementsAre("example.com"));
  auto open = parseNetworkUpdate("{}");  // every field omitted: cleared
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->spec.mode, "full");
  EXPECT_TRUE(open->spec.deny.empty());
  EXPECT_FALSE(parseNetworkUpdate(R"({"denyOut":["*.example.com"]})").ok());
}

TEST(ListQuery, TheSdksQueryParses) {
  // Sandbox.list({query: {metadata: {owner: "a b"}, state: ["paused"]}, limit: 2}) in 2.45;
  // the metadata value is encoded twice by the SDK and once more as a parameter.
  auto q = parseListQuery(
      "/v2/sandboxes?metadata=owner%3Da%252520b%26k%3Dv&state=running%2Cpaused&limit=2"
      "&nextToken=sb-0123456789ab&startedAfter=2026-01-02T03%3A04%3A05.250Z&template=base",
      true);
  ASSERT_TRUE(q.ok()) << q.error().message();
  EXPECT_EQ(q->metadata.at("owner"), "a b");
  EXPECT_EQ(q->metadata.at("k"), "v");
  EXPECT_EQ(q->states, (std::set<SandboxState>{SandboxState::kRunning, SandboxState::kPaused}));
  EXPECT_EQ(q->limit, 2);
  EXPECT_EQ(q->next_token, "sb-0123456789ab");
  EXPECT_EQ(q->started_after_ms.value_or(0), 1767323045250);
  EXPECT_EQ(q->template_id, "base");
  EXPECT_TRUE(q->newest_first);
  auto asc = parseListQuery("/v2/sandboxes?order=asc&state=paused", true);
  ASSERT_TRUE(asc.ok());
  EXPECT_FALSE(asc->newest_first);
  EXPECT_EQ(asc->states, (std::set<SandboxState>{SandboxState::kPaused}));
  // Defaults: v2 lists running and paused, 100 at a time; v1 running only.
  auto d = parseListQuery("/v2/sandboxes", true);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->limit, 100);
  EXPECT_EQ(d->states.size(), 2u);
  auto v1 = parseListQuery("/sandboxes?metadata=a%3Db", false);
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(v1->states, (std::set<SandboxState>{SandboxState::kRunning}));
}

TEST(ListQuery, BadOrOverlongInputIsRefused) {
  for (const char* t : {"/v2/sandboxes?limit=0", "/v2/sandboxes?limit=101", "/v2/sandboxes?limit=x",
                        "/v2/sandboxes?state=dead", "/v2/sandboxes?order=up",
                        "/v2/sandboxes?startedAfter=yesterday", "/v2/sandboxes?nextToken=../x",
                        "/v2/sandboxes?metadata=novalue", "/v2/sandboxes?bogus=1",
                        "/sandboxes?limit=2", "/v2/sandboxes?limit=1&limit=2"})
    EXPECT_FALSE(parseListQuery(t, std::string_view(t).find("/v2/") == 0).ok()) << t;
  std::string many = "/v2/sandboxes?metadata=";
  for (int i = 0; i < 40; ++i) many += "k" + std::to_string(i) + "%3Dv%26";
  EXPECT_FALSE(parseListQuery(many, true).ok());
}

TEST(MetricsRange, UnixSecondsBothOptional) {
  auto r = parseMetricsRange("/sandboxes/sb-1/metrics?start=100&end=200");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first.value_or(-1), 100);
  EXPECT_EQ(r->second.value_or(-1), 200);
  auto none = parseMetricsRange("/sandboxes/sb-1/metrics");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->first || none->second);
  EXPECT_FALSE(parseMetricsRange("/x?start=200&end=100").ok());
  EXPECT_FALSE(parseMetricsRange("/x?start=-1").ok());
  EXPECT_FALSE(parseMetricsRange("/x?start=1.5").ok());
  EXPECT_FALSE(parseMetricsRange("/x?step=1").ok());
}

TEST(Rfc3339, OffsetsAndFractions) {
  EXPECT_EQ(parseRfc3339("1970-01-01T00:00:00Z").value_or(-1), 0);
  EXPECT_EQ(parseRfc3339("1970-01-01T01:00:00+01:00").value_or(-1), 0);
  EXPECT_EQ(parseRfc3339("1970-01-01T00:00:01.5Z").value_or(-1), 1500);
  EXPECT_FALSE(parseRfc3339("1970-13-01T00:00:00Z").ok());
  EXPECT_FALSE(parseRfc3339("1970-01-01T00:00:00").ok());
}

TEST(TemplateName, TagsAndNamespaces) {
  EXPECT_EQ(templateName("base").value_or("?"), "base");
  EXPECT_EQ(templateName("base:default").value_or("?"), "base");
  EXPECT_EQ(templateName("team/snap-1:default").value_or("?"), "snap-1");
  EXPECT_FALSE(templateName("base:v2").ok());
  EXPECT_FALSE(templateName("").ok());
  EXPECT_FALSE(templateName("a b").ok());
}

}  // namespace
}  // namespace vessel::e2b
