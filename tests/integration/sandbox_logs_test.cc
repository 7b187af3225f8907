// Sandbox logs end to end (issue 28, docs/logs.md): a real vesseld with
// --log-format=json and a real guest. One sandbox is created, a command
// runs through the native data plane and another through E2B's envd, each
// with a secret in its environment, the sandbox is deleted; its log is
// then read as JSON lines (with kind and since filters, against
// api/openapi.yaml), followed as SSE from before the first command to the
// end the delete brings, through E2B's two logs routes and `vessel logs`.
// No secret (API key, session token, envd access token, credential value,
// environment value) is in any of them. vesseld's own log lines are JSON,
// each API request once with the id its response carried.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "base/child_process.h"
#include "base/fd.h"
#include "base/sha256.h"
#include "e2b/envd/connect.h"
#include "http_client.h"
#include "store/store.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Reply;
using testing::str;

const std::string kKey2 = "vsk_" + std::string(64, '2');
const std::string kEnvSecret = "env-secret-4b1d9c0e7a2f";        // in a command's environment
const std::string kCredSecret = "cred-secret-9f8e7d6c5b4a3210";  // a credential's value

std::vector<json::value> jsonLines(const std::string& body) {
  std::vector<json::value> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    boost::system::error_code ec;
    auto v = json::parse(line, ec);
    EXPECT_FALSE(ec) << "not JSON: " << line;
    if (!ec) out.push_back(std::move(v));
  }
  return out;
}

// "kind/event-or-phase" of each entry, in order.
std::vector<std::string> shape(const std::vector<json::value>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) {
    const auto& d = e.at("data");
    std::string what = d.as_object().contains("event") ? str(d, "event") : str(d, "phase");
    out.push_back(str(e, "kind") + "/" + what);
  }
  return out;
}

using testing::CliRun;

CliRun vesselCli(const testing::Vesseld& d, const std::vector<std::string>& args) {
  return testing::runCli(VESSEL_PATH, d, args, {.timeout = std::chrono::seconds(120)});
}

// Long because it is one sandbox's whole story, each step checked where
// it happens, and one guest boot is what the test costs.
TEST(SandboxLogsTest, LifecycleAndCommandsFollowedFilteredAndFreeOfSecrets) {
  testing::Vesseld d(VESSELD_PATH, {"--log-format=json"});
  d.setContract(testing::apiContract());
  ASSERT_TRUE(d.start()) << d.log();
  {
    auto db = store::openSqlite(d.stateDir() + "/vessel.db");
    ASSERT_TRUE(db.ok()) << db.error().message();
    ASSERT_TRUE((*db)->createTenant("t2", "second").ok());
    ASSERT_TRUE((*db)->addApiKey("t2", sha256Hex(kKey2)).ok());
  }
  Reply cred =
      d.call("POST", "/v1/credentials",
             R"({"name":"example","hosts":["api.example.com"],"header":"Authorization","value":")" +
                 kCredSecret + R"("})");
  ASSERT_EQ(cred.status / 100, 2) << cred.body;

  std::string why;
  std::string id = d.createSandbox("{}", &why);
  ASSERT_FALSE(id.empty()) << why << d.log();

  // Followed from now to the end: the stream ends itself once the sandbox
  // is deleted and its last entry sent.
  testing::Request fr;
  fr.target = "/v1/sandboxes/" + id + "/logs?follow=true";
  fr.bearer = d.key();
  fr.deadline = 600s;
  auto follower = testing::HttpStream::open(d.port(), fr);
  ASSERT_TRUE(follower);
  std::thread follow([&] { follower->readAll(); });

  // A command through the native data plane, a secret in its environment.
  std::string token = d.session(id);
  ASSERT_FALSE(token.empty());
  json::object exec{{"cmd", json::array{"/bin/sh", "-c", "test -n \"$SECRET\" && exit 3"}},
                    {"env", json::object{{"SECRET", kEnvSecret}}}};
  auto out = d.exec(token, json::serialize(exec));
  EXPECT_EQ(out.exit_code, 3);

  // A command through E2B's envd, its token in its environment.
  // A second session: its token must not show either.
  Reply conn = d.call("POST", "/v1/sandboxes/" + id + "/sessions");
  ASSERT_EQ(conn.status, 201);
  testing::Request er;
  er.method = "POST";
  er.target = "/sandboxes/" + id + "/connect";
  er.body = R"({"timeout":600})";
  er.bearer = d.key();
  Reply connected = testing::call(d.e2bPort(), er);
  ASSERT_EQ(connected.status / 100, 2) << connected.body;
  std::string envd_token = str(connected.js(), "envdAccessToken");
  ASSERT_GT(envd_token.size(), 16u) << connected.body;
  json::object start{{"process", json::object{{"cmd", "/bin/sh"},
                                              {"args", json::array{"-c", "echo hi; exit 7"}},
                                              {"envs", json::object{{"TOKEN", envd_token}}}}}};
  testing::Request pr;
  pr.method = "POST";
  pr.target = "/process.Process/Start";
  pr.json = false;
  pr.headers = {"E2b-Sandbox-Id: " + id, "X-Access-Token: " + envd_token,
                "Content-Type: application/connect+json"};
  pr.body = e2b::envd::encodeEnvelope(0, json::serialize(start));
  Reply ps = testing::call(d.envdPort(), pr);
  ASSERT_EQ(ps.status, 200) << ps.body;
  EXPECT_THAT(ps.body, HasSubstr("exit status 7"));

  ASSERT_TRUE(d.deleteSandbox(id));
  follow.join();

  // The log as JSON lines: every entry as the spec says.
  Reply all = d.call("GET", "/v1/sandboxes/" + id + "/logs");
  ASSERT_EQ(all.status, 200) << all.body;
  EXPECT_THAT(all.header("Content-Type"), HasSubstr("application/x-ndjson"));
  EXPECT_THAT(all.header("X-Request-Id"), ::testing::StartsWith("req-"));
  auto entries = jsonLines(all.body);
  for (const auto& e : entries) {
    auto s = testing::apiContract()->checkSchema("SandboxLogEntry", e);
    EXPECT_TRUE(s.ok()) << s.error().message();
  }
  auto seen = shape(entries);
  ASSERT_GE(seen.size(), 4u) << all.body;
  EXPECT_EQ(seen.front(), "lifecycle/created");
  EXPECT_EQ(seen.back(), "lifecycle/deleted");
  auto has = [&](const std::string& s) { return std::count(seen.begin(), seen.end(), s); };
  EXPECT_EQ(has("command/start"), 2) << all.body;
  EXPECT_EQ(has("command/exit"), 2) << all.body;
  EXPECT_EQ(has("lifecycle/deleting"), 1);
  EXPECT_EQ(str(entries.front().at("data"), "template"), "minimal");
  // Who ran what, as whom, and how it ended; the names of its variables only.
  std::set<std::string> who;
  for (const auto& e : entries) {
    if (str(e, "kind") != "command") continue;
    const auto& data = e.at("data");
    who.insert(str(data, "who"));
    if (str(data, "phase") == "start") {
      EXPECT_TRUE(data.as_object().contains("env")) << e;
      EXPECT_EQ(data.at("argv").as_array()[0].as_string(), "/bin/sh");
    } else {
      int64_t code = data.at("exit_code").as_int64();
      EXPECT_TRUE(code == 3 || code == 7) << e;
      EXPECT_TRUE(data.as_object().contains("duration_ms")) << e;
      if (code == 7) {
        EXPECT_EQ(data.at("bytes_out").as_int64(), 3) << e;  // "hi\n"
      }
    }
  }
  ASSERT_EQ(who.size(), 2u);
  EXPECT_TRUE(who.count("envd"));
  EXPECT_THAT(*who.rbegin(), ::testing::StartsWith("ses-"));  // after "envd"

  // Filters.
  Reply commands = d.call("GET", "/v1/sandboxes/" + id + "/logs?kind=command");
  ASSERT_EQ(commands.status, 200);
  for (const auto& s : shape(jsonLines(commands.body)))
    EXPECT_THAT(s, ::testing::StartsWith("command/"));
  EXPECT_EQ(jsonLines(commands.body).size(), 4u);
  Reply later = d.call("GET", "/v1/sandboxes/" + id + "/logs?since=2999-01-01T00%3A00%3A00Z");
  ASSERT_EQ(later.status, 200);
  EXPECT_TRUE(later.body.empty()) << later.body;
  EXPECT_EQ(d.call("GET", "/v1/sandboxes/" + id + "/logs?kind=console").status, 400);
  // Another tenant's sandbox is as absent as none.
  EXPECT_EQ(d.call("GET", "/v1/sandboxes/" + id + "/logs", "", kKey2).status, 404);
  EXPECT_EQ(d.call("GET", "/v1/sandboxes/sb-000000000000/logs").status, 404);

  // The follow saw the same entries, then the stream ended.
  const Reply& streamed = follower->reply();
  EXPECT_EQ(streamed.status, 200);
  auto events = testing::parseSse(streamed.body);
  std::vector<json::value> followed;
  for (const auto& ev : events) {
    EXPECT_EQ(ev.type, "log");
    followed.push_back(ev.data);
  }
  EXPECT_EQ(shape(followed), seen);
  // Resumed after an id: only what came after it.
  ASSERT_GE(events.size(), 2u);
  Reply resumed = d.call("GET", "/v1/sandboxes/" + id + "/logs?follow=true", "", "-",
                         {"Last-Event-ID: " + std::to_string(events[events.size() - 2].id)});
  EXPECT_EQ(testing::parseSse(resumed.body).size(), 1u) << resumed.body;

  // E2B's logs routes, in their shapes.
  testing::Request lr;
  lr.bearer = d.key();
  lr.target = "/v2/sandboxes/" + id + "/logs";
  Reply v2 = testing::call(d.e2bPort(), lr);
  ASSERT_EQ(v2.status, 200) << v2.body;
  json::value v2js = v2.js();
  const auto& v2logs = v2js.at("logs").as_array();
  EXPECT_EQ(v2logs.size(), entries.size());
  for (const auto& l : v2logs) {
    EXPECT_NE(str(l, "timestamp"), "<missing>");
    EXPECT_NE(str(l, "message"), "<missing>");
    EXPECT_TRUE(l.at("fields").is_object());
    for (const auto& [k, v] : l.at("fields").as_object()) EXPECT_TRUE(v.is_string()) << k;
  }
  EXPECT_THAT(str(v2logs.front(), "message"), HasSubstr("created from template minimal"));
  lr.target = "/v2/sandboxes/" + id + "/logs?direction=backward&limit=1&cursor=32503680000000";
  Reply newest = testing::call(d.e2bPort(), lr);
  ASSERT_EQ(newest.status, 200) << newest.body;
  ASSERT_EQ(newest.js().at("logs").as_array().size(), 1u);
  EXPECT_EQ(str(newest.js().at("logs").as_array()[0], "message"), "deleted");
  lr.target = "/sandboxes/" + id + "/logs";
  Reply v1 = testing::call(d.e2bPort(), lr);
  ASSERT_EQ(v1.status, 200) << v1.body;
  EXPECT_EQ(v1.js().at("logs").as_array().size(), entries.size());
  EXPECT_EQ(v1.js().at("logEntries").as_array().size(), entries.size());
  lr.bearer = kKey2;
  EXPECT_EQ(testing::call(d.e2bPort(), lr).status, 404);

  // `vessel logs`, as docker logs: every entry, then (-f) to the end.
  CliRun cli = vesselCli(d, {"logs", id});
  EXPECT_EQ(cli.code, 0) << cli.err;
  EXPECT_THAT(cli.out, HasSubstr("created from template minimal (snapshot)"));
  EXPECT_THAT(cli.out, HasSubstr("exit 7 after"));
  CliRun cli_cmd = vesselCli(d, {"logs", id, "-f", "--kind", "command", "--since", "1h"});
  EXPECT_EQ(cli_cmd.code, 0) << cli_cmd.err;
  EXPECT_THAT(cli_cmd.out, Not(HasSubstr("lifecycle")));
  EXPECT_THAT(cli_cmd.out, HasSubstr("(envd): /bin/sh -c 'echo hi; exit 7'"));

  // No secret in any of it.
  std::string everything = all.body + streamed.body + v1.body + v2.body + cli.out + cli_cmd.out;
  for (const std::string& secret :
       {d.key(), token, envd_token, kEnvSecret, kCredSecret, str(conn.js(), "token")}) {
    EXPECT_THAT(everything, Not(HasSubstr(secret))) << "a secret in the log: " << secret;
  }

  // vesseld's own log: JSON lines, every request once with its id.
  std::string rid = all.header("X-Request-Id");
  int requests_with_id = 0, json_lines = 0;
  std::istringstream daemon_log(d.log());
  for (std::string line; std::getline(daemon_log, line);) {
    if (line.empty() || line[0] != '{') continue;
    boost::system::error_code ec;
    auto v = json::parse(line, ec);
    ASSERT_FALSE(ec) << "not a JSON log line: " << line;
    ++json_lines;
    for (const char* k : {"time", "level", "component", "message"})
      EXPECT_TRUE(v.as_object().contains(k)) << line;
    if (str(v, "request_id") == rid) {
      ++requests_with_id;
      EXPECT_EQ(str(v, "route"), "/v1/sandboxes/{id:sandbox}/logs");
      EXPECT_EQ(str(v, "status"), "200");
      EXPECT_NE(str(v, "duration_ms"), "<missing>");
    }
  }
  EXPECT_GT(json_lines, 10);
  EXPECT_EQ(requests_with_id, 1);
}

}  // namespace
}  // namespace vessel
