// The contract checker itself, on the real api/openapi.yaml and on small
// specs: what it lets through, and that what it refuses says where and why.
#include "openapi_validator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace vessel::testing {
namespace {

namespace json = boost::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

const char* kTime = "2024-05-01T12:00:00Z";

json::object sandbox(const std::string& state = "running") {
  return {{"id", "sb-123abc"},   {"template", "minimal"},
          {"state", state},      {"vcpus", 1},
          {"memory_mib", 256},   {"metadata", json::object{}},
          {"created_at", kTime}, {"updated_at", "2024-05-01T12:00:01.123+02:00"}};
}

json::object operation(const std::string& kind = "create") {
  return {{"id", "op-1"},       {"kind", kind},        {"sandbox_id", "sb-123abc"},
          {"state", "pending"}, {"created_at", kTime}, {"updated_at", kTime}};
}

json::object error(const std::string& code = "not_found") {
  return {{"code", code}, {"message", "sandbox sb-1 not found"}};
}

class OpenApiTest : public ::testing::Test {
 protected:
  // Loaded per test (a few milliseconds): a failure in SetUp fails the
  // test, where one in SetUpTestSuite would only skip it.
  void SetUp() override {
    auto s = OpenApi::load(VESSEL_OPENAPI_SPEC);
    ASSERT_TRUE(s.ok()) << s.error().message();
    spec_ = std::make_unique<OpenApi>(std::move(*s));
  }
  // The failure message, or "" if the response is allowed.
  std::string why(std::string_view method, std::string_view target, int status,
                  const json::value& body) {
    auto r = spec_->checkResponse(method, target, status, body);
    return r.ok() ? "" : r.error().message();
  }
  std::unique_ptr<OpenApi> spec_;
};

TEST_F(OpenApiTest, ValidResponsesPass) {
  json::object accepted{{"sandbox", sandbox("creating")}, {"operation", operation()}};
  EXPECT_EQ(why("POST", "/v1/sandboxes", 202, accepted), "");
  EXPECT_EQ(why("GET", "/v1/sandboxes/sb-123abc", 200, sandbox()), "");
  json::object failed = sandbox("failed");
  failed["error"] = "vesseld restarted and the VM could not be taken over";
  failed["metadata"] = json::object{{"owner", "ci"}};
  EXPECT_EQ(why("GET", "/v1/sandboxes/sb-123abc", 200, failed), "");
  EXPECT_EQ(why("GET", "/v1/sandboxes/sb-000000000000", 404, error()), "");
  json::object list{{"sandboxes", json::array{sandbox(), sandbox("paused")}},
                    {"next_page_token", ""}};
  EXPECT_EQ(why("GET", "/v1/sandboxes?page_size=2&page_token=x", 200, list), "");
  EXPECT_EQ(why("get", "/v1/sandboxes", 200, list), "") << "methods in any case";
  // The :verb form and templates given as templates.
  json::object pausing{{"sandbox", sandbox("pausing")}, {"operation", operation("pause")}};
  EXPECT_EQ(why("POST", "/v1/sandboxes/sb-1:pause", 202, pausing), "");
  EXPECT_EQ(why("POST", "/v1/sandboxes/{id}:resume", 202, pausing), "");
  json::object conflict = error("failed_precondition");
  conflict["details"] = json::object{{"state", "running"}};
  EXPECT_EQ(why("POST", "/v1/sandboxes/sb-1:resume", 409, conflict), "");
  // Streams and bodiless answers: only the status is checked.
  EXPECT_EQ(why("GET", "/v1/operations/op-1/events", 200, "id: 1\n"), "");
  EXPECT_EQ(why("DELETE", "/v1/credentials/gh", 204, nullptr), "");
  // oneOf/allOf and the Health object with extra fields (not closed).
  json::object health{{"status", "ok"}, {"version", "0.1.0"}, {"gateway", json::object{}}};
  EXPECT_EQ(why("GET", "/healthz", 200, health), "");
}

TEST_F(OpenApiTest, InvalidResponsesFailSayingWhere) {
  json::object no_state = sandbox();
  no_state.erase("state");
  EXPECT_THAT(why("GET", "/v1/sandboxes/sb-1", 200, no_state),
              AllOf(HasSubstr("GET /v1/sandboxes/{id} 200"),
                    HasSubstr("$: missing required property \"state\"")));

  json::object wrong_type = sandbox();
  wrong_type["vcpus"] = "one";
  EXPECT_THAT(why("GET", "/v1/sandboxes/sb-1", 200, wrong_type),
              HasSubstr("$.vcpus: string \"one\", want integer"));

  json::object weird{{"sandbox", sandbox("weird")}, {"operation", operation()}};
  EXPECT_THAT(why("POST", "/v1/sandboxes", 202, weird),
              HasSubstr("$.sandbox.state: \"weird\" not in enum"));

  json::object extra = sandbox();
  extra["owner"] = "me";
  EXPECT_THAT(why("GET", "/v1/sandboxes/sb-1", 200, extra),
              HasSubstr("$: property \"owner\" is not allowed"));

  json::object bad_meta = sandbox();
  bad_meta["metadata"] = json::object{{"n", 1}};
  EXPECT_THAT(why("GET", "/v1/sandboxes/sb-1", 200, bad_meta),
              HasSubstr("$.metadata.n: integer 1, want string"));

  json::object bad_time = sandbox();
  bad_time["created_at"] = "yesterday";
  EXPECT_THAT(why("GET", "/v1/sandboxes/sb-1", 200, bad_time),
              HasSubstr("$.created_at: \"yesterday\" is not an RFC 3339 date-time"));

  json::object list{{"sandboxes", json::array{sandbox(), json::object{{"id", "x"}}}},
                    {"next_page_token", ""}};
  EXPECT_THAT(why("GET", "/v1/sandboxes", 200, list), HasSubstr("$.sandboxes[1]: missing"));

  EXPECT_THAT(why("GET", "/v1/sandboxes/sb-1", 404, json::array{}),
              HasSubstr("$: array [], want object"));
  EXPECT_THAT(why("GET", "/v1/sandboxes/sb-1", 404, error("gone")),
              HasSubstr("$.code: \"gone\" not in enum"));
}

TEST_F(OpenApiTest, UndeclaredStatusAndUnknownPathFail) {
  auto r = spec_->checkResponse("GET", "/v1/sandboxes/sb-1", 500, error("internal"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(r.error().message(),
              HasSubstr("GET /v1/sandboxes/{id} 500: status not declared for this operation"));

  r = spec_->checkResponse("GET", "/v1/nothing", 404, error());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kNotFound);
  EXPECT_THAT(r.error().message(), HasSubstr("no path in the spec matches /v1/nothing"));

  r = spec_->checkResponse("PATCH", "/v1/sandboxes/sb-1", 200, sandbox());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kNotFound);
  // An unknown verb is no operation of /v1/sandboxes/{id}.
  EXPECT_FALSE(spec_->checkResponse("POST", "/v1/sandboxes/sb-1:explode", 404, error()).ok());
}

TEST_F(OpenApiTest, RawResponsesCheckContentTypeAndJson) {
  std::string body = json::serialize(error());
  EXPECT_TRUE(
      spec_
          ->checkRawResponse("GET", "/v1/sandboxes/x", 404, "application/json; charset=utf-8", body)
          .ok());
  auto r = spec_->checkRawResponse("GET", "/v1/sandboxes/x", 404, "text/plain", body);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message(), HasSubstr("want application/json"));
  r = spec_->checkRawResponse("GET", "/v1/sandboxes/x", 404, "application/json", "{nope");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message(), HasSubstr("not JSON"));
  // An event stream, cut short: only its status and type count.
  EXPECT_TRUE(
      spec_->checkRawResponse("GET", "/v1/events", 200, "text/event-stream", "id: 1\nev").ok());
  EXPECT_FALSE(spec_->checkRawResponse("GET", "/v1/events", 200, "application/json", "{}").ok());
  EXPECT_TRUE(spec_->checkRawResponse("DELETE", "/v1/credentials/gh", 204, "", "").ok());
  EXPECT_FALSE(spec_->checkRawResponse("DELETE", "/v1/credentials/gh", 204, "", "{}").ok());
}

TEST_F(OpenApiTest, NamedSchemas) {
  EXPECT_TRUE(spec_->checkSchema("Error", error()).ok());
  EXPECT_FALSE(spec_->checkSchema("Error", json::object{{"code", "not_found"}}).ok());
  EXPECT_EQ(spec_->checkSchema("Nope", error()).error().code(), Code::kNotFound);
}

// A small spec for the keywords api/openapi.yaml uses in requests only.
constexpr const char* kSmall = R"(
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /things/{id}:
    get:
      responses:
        "200":
          description: a thing
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Thing"}
        default:
          description: anything else
          content:
            application/json:
              schema: {type: object, required: [code]}
components:
  schemas:
    Thing:
      type: object
      additionalProperties: false
      minProperties: 1
      properties:
        name: {type: string, pattern: "^[a-z]+$", maxLength: 4}
        size: {type: integer, minimum: 1, maximum: 10}
        mode: {oneOf: [{type: string}, {type: integer}]}
        tags: {type: array, minItems: 1, maxItems: 2, items: {type: string}}
        parent: {type: object, nullable: true}
        ratio: {type: number}
        both: {allOf: [{type: object, required: [a]}, {type: object, required: [b]}]}
)";

TEST(OpenApiSmallTest, KeywordsBehave) {
  auto s = OpenApi::parse(kSmall);
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto check = [&](const char* body) {
    auto r = s->checkResponse("GET", "/things/1", 200, json::parse(body));
    return r.ok() ? std::string() : r.error().message();
  };
  EXPECT_EQ(check(R"({"name":"abc","size":3,"mode":"0755","tags":["x"],"parent":null})"), "");
  EXPECT_EQ(check(R"({"mode":493,"ratio":0.5,"both":{"a":1,"b":2}})"), "");
  EXPECT_EQ(check(R"({"size":2.0})"), "") << "an integral number is an integer";
  EXPECT_THAT(check(R"({})"), HasSubstr("want at least 1"));
  EXPECT_THAT(check(R"({"name":"ABC"})"), HasSubstr("$.name: \"ABC\" does not match ^[a-z]+$"));
  EXPECT_THAT(check(R"({"name":"abcde"})"), HasSubstr("$.name: \"abcde\" longer than 4"));
  EXPECT_THAT(check(R"({"size":0})"), HasSubstr("$.size: 0 below minimum"));
  EXPECT_THAT(check(R"({"size":11})"), HasSubstr("$.size: 11 above maximum"));
  EXPECT_THAT(check(R"({"size":1.5})"), HasSubstr("want integer"));
  EXPECT_THAT(check(R"({"mode":true})"), HasSubstr("$.mode: matches 0 of oneOf"));
  EXPECT_THAT(check(R"({"tags":[]})"), HasSubstr("$.tags: 0 items, want at least 1"));
  EXPECT_THAT(check(R"({"tags":["a","b","c"]})"), HasSubstr("want at most 2"));
  EXPECT_THAT(check(R"({"tags":[1]})"), HasSubstr("$.tags[0]: integer 1, want string"));
  EXPECT_THAT(check(R"({"parent":[]})"), HasSubstr("$.parent: array [], want object"));
  EXPECT_THAT(check(R"({"ratio":"x"})"), HasSubstr("want number"));
  EXPECT_THAT(check(R"({"both":{"a":1}})"), HasSubstr("$.both: missing required property \"b\""));
  // Any other status falls to `default`.
  EXPECT_TRUE(s->checkResponse("GET", "/things/1", 503, json::parse(R"({"code":"x"})")).ok());
  EXPECT_FALSE(s->checkResponse("GET", "/things/1", 503, json::parse(R"({})")).ok());
}

TEST(OpenApiSmallTest, UnsupportedKeywordsFailAtLoad) {
  std::string spec = kSmall;
  spec += "    Odd: {type: array, uniqueItems: true}\n";
  auto s = OpenApi::parse(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(),
              HasSubstr("$.components.schemas.Odd.uniqueItems: schema keyword not supported"));

  spec = kSmall;
  spec += "    Dangling: {$ref: \"#/components/schemas/Missing\"}\n";
  s = OpenApi::parse(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), HasSubstr("not found"));

  EXPECT_FALSE(
      OpenApi::parse("openapi: 3.0.3\npaths: {/x: {get: {responses: {\"2\": {}}}}}\n").ok());
  EXPECT_FALSE(OpenApi::parse("openapi: [unclosed\n").ok());
  EXPECT_EQ(OpenApi::load("/nonexistent/openapi.yaml").error().code(), Code::kNotFound);
}

}  // namespace
}  // namespace vessel::testing
