#include "api/resources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vessel::api {
namespace {

using ::testing::HasSubstr;

TEST(ResourcesTest, CreateRequestDefaultsAndFields) {
  auto r = parseCreateRequest("");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->template_name, "minimal");
  r = parseCreateRequest(
      R"({"template":"t1","vcpus":2,"memory_mib":512,"disk_mib":4096,"env":{"A_1":"x"},)"
      R"("metadata":{"k":"v"}})");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->template_name, "t1");
  EXPECT_EQ(r->vcpus, 2u);
  EXPECT_EQ(r->memory_mib, 512u);
  EXPECT_EQ(r->disk_mib, 4096u);
  EXPECT_THAT(r->env, ::testing::ElementsAre("A_1=x"));
  EXPECT_EQ(r->metadata.at("k"), "v");
}

TEST(ResourcesTest, CreateRequestRejectsBadInputNamingTheField) {
  for (const char* body :
       {"{", "[]", "null", R"({"x":1})", R"({"template":""})", R"({"vcpus":0})", R"({"vcpus":-1})",
        R"({"vcpus":1.5})", R"({"memory_mib":18446744073709551615})", R"({"env":{"A=B":"x"}})",
        R"({"env":{"A":1}})", R"({"env":{"A":"x\u0000y"}})", R"({"disk_mib":63})",
        R"({"disk_mib":"512"})", R"({"disk_mib":16777217})", R"({"metadata":[]})",
        R"({"metadata":{"k":{"nested":"x"}}})", "[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]"}) {
    auto r = parseCreateRequest(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << body;
  }
  EXPECT_THAT(parseCreateRequest(R"({"vcpus":"2"})").error().message(), HasSubstr("vcpus"));
}

TEST(ResourcesTest, CreateRequestNetwork) {
  auto r = parseCreateRequest(R"({})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->network.has_value());  // the node's default
  r = parseCreateRequest(
      R"({"network":{"mode":"allowlist","allow":["a.test","*.b.test:8443"]},"credentials":["gh"]})");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->network->mode, "allowlist");
  EXPECT_THAT(r->network->allow, ::testing::ElementsAre("a.test", "*.b.test:8443"));
  EXPECT_THAT(r->network->credentials, ::testing::ElementsAre("gh"));
  r = parseCreateRequest(R"({"network":{"allow":["a.test"]}})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->network->mode, "allowlist");
  r = parseCreateRequest(R"({"network":{"mode":"none"}})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->network->mode, "none");
  // Fail closed: an empty allowlist allows nothing; credentials alone take
  // the node's default ("" until the node resolves it).
  r = parseCreateRequest(R"({"network":{"allow":[]}})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->network->mode, "none");
  r = parseCreateRequest(R"({"credentials":["gh"]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->network->mode, "");
  for (const char* body :
       {R"({"network":"full"})", R"({"network":{"mode":"open"}})",
        R"({"network":{"mode":"full","allow":["a.test"]}})",
        R"({"network":{"allow":["127.0.0.1"]}})", R"({"network":{"allow":["a b"]}})",
        R"({"network":{"allow":["*.test"]}})", R"({"network":{"allow":["a.test:0"]}})",
        R"({"network":{"mode":"none","x":1}})", R"({"credentials":"gh"})",
        R"({"credentials":["a/b"]})"}) {
    auto bad = parseCreateRequest(body);
    ASSERT_FALSE(bad.ok()) << body;
    EXPECT_EQ(bad.error().code(), Code::kInvalidArgument) << body;
  }
}

TEST(ResourcesTest, ListQuery) {
  auto q = parseListQuery("/v1/sandboxes?page_size=7&page_token=sb-1");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->page_size, 7);
  EXPECT_EQ(q->page_token, "sb-1");
  EXPECT_EQ(parseListQuery("/v1/sandboxes")->page_size, 50);
  for (const char* t :
       {"/x?page_size=0", "/x?page_size=101", "/x?page_size=3x", "/x?page_token=../etc",
        "/x?other=1", "/x?metadata.=1", "/x?metadata=1", "/x?metadata.a=1&metadata.a=2"})
    EXPECT_FALSE(parseListQuery(t).ok()) << t;
  auto m = parseListQuery("/v1/sandboxes?metadata.team=a%20b&metadata.x=1");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->metadata.size(), 2u);
  EXPECT_EQ(m->metadata.at("team"), "a b");
  EXPECT_TRUE(metadataMatches({{"team", "a b"}, {"x", "1"}, {"y", "2"}}, m->metadata));
  EXPECT_FALSE(metadataMatches({{"team", "a b"}}, m->metadata));
  EXPECT_FALSE(metadataMatches({{"team", "a b"}, {"x", "2"}}, m->metadata));
  EXPECT_TRUE(metadataMatches({}, {}));
}

TEST(ResourcesTest, ForkIntoATemplate) {
  auto f = parseForkRequest(R"({"template":"warm-app_2"})");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->template_name, "warm-app_2");
  for (const char* b : {R"({"template":""})", R"({"template":"a/b"})", R"({"template":1})",
                        R"({"template":"a","count":2})"})
    EXPECT_FALSE(parseForkRequest(b).ok()) << b;
}

TEST(ResourcesTest, ForkVolumesShareOrClone) {
  auto shared = parseForkRequest(R"({"count":2})");
  ASSERT_TRUE(shared.ok());
  EXPECT_FALSE(shared->clone_volumes);
  auto cloned = parseForkRequest(R"({"count":2,"volumes":"clone"})");
  ASSERT_TRUE(cloned.ok()) << cloned.error().message();
  EXPECT_TRUE(cloned->clone_volumes);
  EXPECT_FALSE(parseForkRequest(R"({"volumes":"share"})")->clone_volumes);
  for (const char* b : {R"({"volumes":"copy"})", R"({"volumes":true})", R"({"volumes":["clone"]})",
                        R"({"volumes":"clone","template":"t"})"})
    EXPECT_FALSE(parseForkRequest(b).ok()) << b;
}

TEST(ResourcesTest, IdsAndTimes) {
  EXPECT_TRUE(validId("sb-0123456789ab"));
  for (const char* id : {"", "SB-1", "a/b", "..", "a b", "sb_1"}) EXPECT_FALSE(validId(id)) << id;
  EXPECT_EQ(rfc3339(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(rfc3339(1764484800123), "2025-11-30T06:40:00.123Z");
}

TEST(ResourcesTest, OnTimeoutAndPause) {
  auto d = parseCreateRequest("");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->pause_on_timeout);
  EXPECT_TRUE(d->pause_memory);
  EXPECT_FALSE(d->auto_resume);
  auto p = parseCreateRequest(R"({"on_timeout":"pause","auto_resume":true})");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->pause_on_timeout);
  EXPECT_TRUE(p->auto_resume);
  auto fs = parseCreateRequest(R"({"on_timeout":"pause","pause_memory":false})");
  ASSERT_TRUE(fs.ok());
  EXPECT_FALSE(fs->pause_memory);
  EXPECT_FALSE(parseCreateRequest(R"({"on_timeout":"kill"})").ok());
  EXPECT_FALSE(parseCreateRequest(R"({"auto_resume":"yes"})").ok());
  EXPECT_TRUE(parsePauseRequest("").value_or(false));
  EXPECT_FALSE(parsePauseRequest(R"({"memory":false})").value_or(true));
  EXPECT_FALSE(parsePauseRequest(R"({"memory":0})").ok());
  EXPECT_FALSE(parsePauseRequest(R"({"disk":true})").ok());
}

TEST(ResourcesTest, ColdAndFork) {
  auto c = parseCreateRequest(R"({"cold":true})");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->cold);
  EXPECT_FALSE(parseCreateRequest(R"({"cold":1})").ok());
  auto f = parseForkRequest("");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->count, 1);
  f = parseForkRequest(R"({"count":3})");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->count, 3);
  for (const char* bad :
       {R"({"count":0})", R"({"count":17})", R"({"count":"2"})", R"({"cnt":2})", "[2]", "{"})
    EXPECT_FALSE(parseForkRequest(bad).ok()) << bad;
}

TEST(ResourcesTest, TemplateNamesAreScopedToTheirTenant) {
  std::string mine = tenantTemplateName("dev", "py");
  EXPECT_THAT(mine, ::testing::StartsWith("t-"));
  EXPECT_FALSE(builtinTemplateName(mine));
  EXPECT_TRUE(builtinTemplateName("minimal"));
  EXPECT_TRUE(builtinTemplateName("t-rex"));
  EXPECT_EQ(visibleTemplateName("dev", mine), "py");
  EXPECT_EQ(visibleTemplateName("other", mine), std::nullopt);
  EXPECT_EQ(visibleTemplateName("other", "minimal"), "minimal");
  EXPECT_NE(tenantTemplateName("other", "py"), mine);
  // Whose it is: the same for each of a tenant's templates, none for built-ins.
  EXPECT_EQ(templates::templateOwner(mine),
            templates::templateOwner(tenantTemplateName("dev", "other-name")));
  EXPECT_NE(templates::templateOwner(mine),
            templates::templateOwner(tenantTemplateName("other", "py")));
  EXPECT_EQ(templates::templateOwner("minimal"), "");
  EXPECT_EQ(mine.compare(0, templates::templateOwner(mine).size(), templates::templateOwner(mine)),
            0);
}

TEST(ResourcesTest, LogsQuery) {
  auto q = parseLogsQuery(
      "/v1/sandboxes/sb-1/logs?kind=command&since=2026-01-02T03%3A04%3A05Z&after=7&limit=20"
      "&follow=true");
  ASSERT_TRUE(q.ok()) << q.error().message();
  EXPECT_EQ(q->q.kind, "command");
  EXPECT_EQ(q->q.since_ms, 1767323045000);
  EXPECT_EQ(q->q.after_seq, 7);
  EXPECT_EQ(q->q.limit, 20);
  EXPECT_TRUE(q->follow);
  auto none = parseLogsQuery("/v1/sandboxes/sb-1/logs");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->q.limit, 1000);
  EXPECT_FALSE(none->follow);
  for (const char* kind : {"lifecycle", "command", "console", "file", "port", "egress", "start"}) {
    auto k = parseLogsQuery(std::string("/v1/sandboxes/sb-1/logs?kind=") + kind);
    ASSERT_TRUE(k.ok()) << kind;
    EXPECT_EQ(k->q.kind, kind);
  }
  for (const char* bad : {"?kind=stdout", "?since=yesterday", "?limit=0", "?limit=1001",
                          "?after=-1", "?follow=yes", "?other=1"}) {
    auto r = parseLogsQuery(std::string("/v1/sandboxes/sb-1/logs") + bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << bad;
    }
  }
}

}  // namespace
}  // namespace vessel::api
