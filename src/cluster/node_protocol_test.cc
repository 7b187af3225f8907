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

// The volume calls (cluster_volumes.h): their fields round-trip, and the
// parser refuses what no replica sends (ids that are no volume ids, paths
// past 4 KiB or holding NUL, modes past 07777, too many mounts, relative
// mount paths).
TEST(NodeProtocolTest, VolumeCallsRoundTripAndAreBounded) {
  NodeCall c;
  c.id = "sb-1";
  c.volume = "vol-0a1b";
  c.volume_to = "vol-2c3d";
  c.size_mib = 1024;
  c.read_only = true;
  c.path = "/data/ünïcode name";
  c.mode = 0750;
  c.parents = c.recursive = c.hold = true;
  c.mounts = {{"vol-0a1b", "data", "/data", false, ""}, {"vol-2c3d", "snap", "/snap", true, ""}};
  for (const auto& p :
       {parseNodeCall(serializeNodeCall(c)), parseNodeCallHeader(encodeNodeCallHeader(c))}) {
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->volume, c.volume);
    EXPECT_EQ(p->volume_to, c.volume_to);
    EXPECT_EQ(p->size_mib, 1024u);
    EXPECT_TRUE(p->read_only);
    EXPECT_EQ(p->path, c.path);
    EXPECT_EQ(p->mode, 0750u);
    EXPECT_TRUE(p->parents && p->recursive && p->hold);
    ASSERT_EQ(p->mounts.size(), 2u);
    EXPECT_EQ(p->mounts[1].volume_id, "vol-2c3d");
    EXPECT_EQ(p->mounts[1].name, "snap");
    EXPECT_EQ(p->mounts[1].path, "/snap");
    EXPECT_TRUE(p->mounts[1].read_only);
    EXPECT_FALSE(p->mounts[0].read_only);
  }
  auto bare = parseNodeCall(R"({"volume":"vol-1"})");
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->read_only);
  EXPECT_EQ(bare->mode, 0u);
  EXPECT_TRUE(bare->mounts.empty());

  std::string many = R"({"mounts":[)";
  for (int i = 0; i < 17; ++i)
    many +=
        std::string(i ? "," : "") + R"({"volume":"vol-1","path":"/m)" + std::to_string(i) + "\"}";
  for (const std::string& body : {
           std::string(R"({"volume":"VOL-1"})"),
           std::string(R"({"volume":"vol/../x"})"),
           std::string(R"({"volume_to":7})"),
           std::string(R"({"size_mib":-1})"),
           std::string(R"({"size_mib":2000000000})"),
           std::string(R"({"read_only":"yes"})"),
           std::string(R"({"path":")") + std::string(4097, 'a') + "\"}",
           std::string(R"({"path":"a\u0000b"})"),
           std::string(R"({"mode":4096})"),
           std::string(R"({"mode":"0644"})"),
           std::string(R"({"mounts":{}})"),
           std::string(R"({"mounts":[{"volume":"vol-1","path":"rel"}]})"),
           std::string(R"({"mounts":[{"volume":"vol-1"}]})"),
           std::string(R"({"mounts":[{"path":"/x"}]})"),
           many + "]}",
       }) {
    auto p = parseNodeCall(body);
    EXPECT_FALSE(p.ok()) << body;
    if (!p.ok()) {
      EXPECT_EQ(p.error().code(), Code::kInvalidArgument) << body;
    }
  }
  EXPECT_FALSE(parseNodeCallHeader("not base64!").ok());
  EXPECT_FALSE(parseNodeCallHeader(std::string(64 * 1024, 'A')).ok()) << "bounded before decoding";
}

// A volume call's answers: a listing, the file a write made, a volume's
// usage; bounded as a node's bytes are (the replica parses them).
TEST(NodeProtocolTest, VolumeRepliesCarryFilesAndUsage) {
  NodeReply r;
  r.entries = {{"a", "/a", "dir", 4096, 0755, 0, 0, 1700000000000, ""},
               {"l", "/l", "symlink", 3, 0777, 1000, 1000, 5, "/etc/passwd"}};
  r.file = ops::VolumeFileInfo{"f", "/f", "file", 12, 0600, 0, 0, 7, ""};
  r.volume_usage = ops::VolumeUsage{1u << 20, 63u << 20};
  auto p = parseNodeReply(serializeNodeReply(r));
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ(p->entries.size(), 2u);
  EXPECT_EQ(p->entries[0].type, "dir");
  EXPECT_EQ(p->entries[0].mode, 0755u);
  EXPECT_EQ(p->entries[0].mtime_ms, 1700000000000);
  EXPECT_EQ(p->entries[1].target, "/etc/passwd");
  EXPECT_EQ(p->entries[1].uid, 1000u);
  ASSERT_TRUE(p->file.has_value());
  EXPECT_EQ(p->file->size, 12u);
  EXPECT_EQ(p->file->mode, 0600u);
  ASSERT_TRUE(p->volume_usage.has_value());
  EXPECT_EQ(p->volume_usage->free_bytes, 63u << 20);
  std::string too_many = R"({"ok":true,"entries":[)";
  for (int i = 0; i < 10001; ++i)
    too_many += std::string(i ? "," : "") + R"({"path":"/x","type":"file"})";
  for (const std::string& body : {
           std::string(R"({"ok":true,"entries":{}})"),
           std::string(R"({"ok":true,"entries":[{"type":"file"}]})"),
           std::string(R"({"ok":true,"entries":[{"path":"/x","type":"file","mode":65536}]})"),
           std::string(R"({"ok":true,"file":{"path":"/x","type":"file","uid":-1}})"),
           std::string(R"({"ok":true,"file":{"path":"/x","type":")") + std::string(17, 'f') +
               "\"}}",
           std::string(R"({"ok":true,"volume_usage":[]})"),
           too_many + "]}",
       }) {
    auto bad = parseNodeReply(body);
    EXPECT_FALSE(bad.ok()) << body.substr(0, 80);
    if (!bad.ok()) {
      EXPECT_EQ(bad.error().code(), Code::kProtocol) << body.substr(0, 80);
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
