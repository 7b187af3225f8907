// The node API's one parser: what it accepts round-trips, and what it
// refuses (wrong types, oversized strings and lists, ids with characters
// ids never have) is an Error, never a crash or a silently trimmed field.
#include "cluster/node_protocol.h"

#include <gtest/gtest.h>

namespace vessel::cluster {
namespace {

TEST(NodeProtocolTest, CallsRoundTrip) {
  NodeCall c;
  c.id = "sb-1a2b";
  c.tenant = "t1";
  c.template_name = "t-ab12-python";
  c.env = {"A=1", "B=two words"};
  c.cold = true;
  c.disk_mib = 2048;
  c.network = ops::NetworkSpec{"allowlist", {"pypi.org", "*.github.com:443"}, {"gh"}, {}};
  c.copies = {"sb-c1", "sb-c2"};
  c.memory = false;
  c.registry_username = "alice";
  c.registry_password = "pass:with colon";
  auto p = parseNodeCall(serializeNodeCall(c));
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->id, c.id);
  EXPECT_EQ(p->tenant, c.tenant);
  EXPECT_EQ(p->template_name, c.template_name);
  EXPECT_EQ(p->env, c.env);
  EXPECT_TRUE(p->cold);
  EXPECT_EQ(p->disk_mib, 2048u);
  ASSERT_TRUE(p->network.has_value());
  EXPECT_EQ(p->network->mode, "allowlist");
  EXPECT_EQ(p->network->allow, c.network->allow);
  EXPECT_EQ(p->network->credentials, c.network->credentials);
  EXPECT_EQ(p->copies, c.copies);
  EXPECT_FALSE(p->memory);
  EXPECT_EQ(p->registry_username, "alice");
  EXPECT_EQ(p->registry_password, "pass:with colon");
  EXPECT_FALSE(
      parseNodeCall(R"({"registry_password":)" + std::string("\"") + std::string(5000, 'x') + "\"}")
          .ok())
      << "a registry secret is bounded";
  auto bare = parseNodeCall(R"({"id":"sb-x"})");
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->network.has_value());
  EXPECT_FALSE(bare->cold);
  EXPECT_TRUE(bare->memory);  // a pause keeps memory unless told otherwise
}

TEST(NodeProtocolTest, RefusesWhatIsNotACall) {
  for (const char* body : {
           "",
           "[]",
           "nul",
           R"({"id":7})",
           R"({"id":"../etc"})",
           R"({"id":"a b"})",
           R"({"tenant":"x;y"})",
           R"({"env":"A=1"})",
           R"({"env":[1]})",
           R"({"cold":"yes"})",
           R"({"memory":0})",
           R"({"disk_mib":-1})",
           R"({"disk_mib":1.5})",
           R"({"network":[]})",
           R"({"network":{"allow":"x"}})",
           R"({"copies":["ok","no/slash"]})",
           R"({"a":[[[[[[[[[[1]]]]]]]]]]})",
       }) {
    auto p = parseNodeCall(body);
    EXPECT_FALSE(p.ok()) << body;
    if (!p.ok()) {
      EXPECT_EQ(p.error().code(), Code::kInvalidArgument) << body;
    }
  }
  EXPECT_FALSE(parseNodeCall(R"({"id":")" + std::string(200, 'a') + R"("})").ok());
  std::string many = R"({"copies":[)";
  for (int i = 0; i < 17; ++i) many += std::string(i ? "," : "") + "\"c" + std::to_string(i) + "\"";
  EXPECT_FALSE(parseNodeCall(many + "]}").ok());
}

TEST(NodeProtocolTest, RepliesCarryStatusHoldingAndCopies) {
  NodeReply r;
  r.status = Error(Code::kResourceExhausted, "node full");
  r.holding = ops::Holding::kPaused;
  r.copies = {okStatus(), Error(Code::kUnavailable, "copy 2 failed")};
  auto p = parseNodeReply(serializeNodeReply(r));
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_FALSE(p->status.ok());
  EXPECT_EQ(p->status.error().code(), Code::kResourceExhausted);
  EXPECT_EQ(p->status.error().message(), "node full");
  EXPECT_EQ(p->holding, ops::Holding::kPaused);
  ASSERT_EQ(p->copies.size(), 2u);
  EXPECT_TRUE(p->copies[0].ok());
  EXPECT_EQ(p->copies[1].error().code(), Code::kUnavailable);
  EXPECT_FALSE(parseNodeReply("{}").ok());
  EXPECT_FALSE(parseNodeReply("not json").ok());
}

// The replies of the network and usage calls carry what the node stored
// and measured; a network in a reply is bounded as in a call.
TEST(NodeProtocolTest, RepliesCarryNetworkAndUsage) {
  NodeReply r;
  r.holding = ops::Holding::kRunning;
  r.network = ops::NetworkSpec{"allowlist", {"pypi.org:443"}, {"gh"}, {"pypi.org"}};
  ops::Usage u;
  u.cpu_count = 2;
  u.cpu_used_pct = 12.5;
  u.mem_used_bytes = 64u << 20;
  u.disk_used_bytes = 3u << 20;
  u.disk_total_bytes = 2048ull << 20;
  r.usage = u;
  auto p = parseNodeReply(serializeNodeReply(r));
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_TRUE(p->network.has_value());
  EXPECT_EQ(p->network->mode, "allowlist");
  EXPECT_EQ(p->network->allow, r.network->allow);
  EXPECT_EQ(p->network->credentials, r.network->credentials);
  EXPECT_EQ(p->network->inspect, r.network->inspect);
  ASSERT_TRUE(p->usage.has_value());
  EXPECT_EQ(p->usage->cpu_count, 2u);
  EXPECT_DOUBLE_EQ(p->usage->cpu_used_pct, 12.5);
  EXPECT_EQ(p->usage->mem_used_bytes, 64u << 20);
  EXPECT_EQ(p->usage->disk_total_bytes, 2048ull << 20);
  auto none = parseNodeReply(R"({"ok":true,"holding":"running"})");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->network.has_value());
  for (const char* body : {R"({"ok":true,"network":[]})", R"({"ok":true,"network":{"allow":7}})",
                           R"({"ok":true,"network":{"mode":"a-mode-name-far-too-long"}})"}) {
    auto bad = parseNodeReply(body);
    EXPECT_FALSE(bad.ok()) << body;
    if (!bad.ok()) {
      EXPECT_EQ(bad.error().code(), Code::kProtocol) << body;
    }
  }
}

TEST(NodeProtocolTest, TokensCompareWhole) {
  EXPECT_TRUE(tokenMatches("s3cret-token", "s3cret-token"));
  EXPECT_FALSE(tokenMatches("s3cret-tokem", "s3cret-token"));
  EXPECT_FALSE(tokenMatches("s3cret", "s3cret-token"));
  EXPECT_FALSE(tokenMatches("", ""));  // no token configured never matches
}

}  // namespace
}  // namespace vessel::cluster
