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
const std::string kFileData = "file-data-5e6f7a8b9c0d";          // a file's contents

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
  // An allowlist: the egress gateway decides about its lookups.
  std::string id =
      d.createSandbox(R"({"network": {"mode": "allowlist", "allow": ["api.example.com"]}})", &why);
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

  // Files through each front end: written and read back on the data
  // plane, removed through envd's filesystem service.
  Reply up = d.data(token, "PUT", "/v1/files?path=/tmp/logged.txt", kFileData, false);
  ASSERT_EQ(up.status, 201) << up.body;
  Reply down = d.data(token, "GET", "/v1/files?path=/tmp/logged.txt");
  ASSERT_EQ(down.status, 200);
  testing::Request rm;
  rm.method = "POST";
  rm.target = "/filesystem.Filesystem/Remove";
  rm.json = false;
  rm.headers = {"E2b-Sandbox-Id: " + id, "X-Access-Token: " + envd_token,
                "Content-Type: application/json"};
  rm.body = R"({"path":"/tmp/logged.txt"})";
  Reply removed = testing::call(d.envdPort(), rm);
  ASSERT_EQ(removed.status, 200) << removed.body;
  // A line on the guest's console, and a server in it reached through the
  // ingress (its session's token as the traffic token).
  auto rootSh = [&](const std::string& cmd) {
    json::object o{{"shell", cmd}, {"user", "root"}, {"env", json::object{{"SECRET", kEnvSecret}}}};
    return d.exec(token, json::serialize(o));
  };
  EXPECT_EQ(rootSh("echo vessel-console-marker > /dev/console").exit_code, 0);
  EXPECT_EQ(rootSh("mkdir -p /tmp/www && echo served > /tmp/www/index.html && "
                   "httpd -p 127.0.0.1:8080 -h /tmp/www")
                .exit_code,
            0);
  // A lookup the gateway refuses; its decision reaches the log within a
  // read or two (vesseld reads the gateway's decisions every second).
  rootSh("nslookup denied.example.org 172.16.0.1; true");
  bool decided = false;
  for (int i = 0; i < 50 && !decided; ++i) {
    if (i) std::this_thread::sleep_for(200ms);
    Reply eg = d.call("GET", "/v1/sandboxes/" + id + "/logs?kind=egress");
    decided = eg.body.find("denied.example.org") != std::string::npos;
  }
  EXPECT_TRUE(decided) << d.log();
  testing::Request portr;
  portr.target = "http://8080-" + id + ".vessel.localhost/";
  portr.headers = {"e2b-traffic-access-token: " + token};
  portr.deadline = 30s;
  Reply served;
  for (int i = 0; i < 20 && served.status != 200; ++i) {
    if (i) std::this_thread::sleep_for(500ms);
    served = testing::call(d.envdPort(), portr);
  }
  ASSERT_EQ(served.status, 200) << served.head << served.body;

  // Deleted by a request whose id its operation's entries name.
  Reply del = d.call("DELETE", "/v1/sandboxes/" + id);
  ASSERT_EQ(del.status / 100, 2) << del.body;
  std::string del_request = del.header("X-Request-Id");
  ASSERT_THAT(del_request, ::testing::StartsWith("req-"));
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
  EXPECT_EQ(has("command/start"), 5) << all.body;
  EXPECT_EQ(has("command/exit"), 5) << all.body;
  EXPECT_EQ(has("lifecycle/deleting"), 1);
  for (const auto& e : entries) {
    std::string what = shape({e})[0];
    if (what == "lifecycle/deleting" || what == "lifecycle/deleted") {
      EXPECT_EQ(str(e.at("data"), "request_id"), del_request) << e;
    }
  }
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
      EXPECT_TRUE(code == 0 || code == 3 || code == 7) << e;
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
  EXPECT_EQ(jsonLines(commands.body).size(), 10u);
  // The other kinds, each by its filter.
  auto ofKind = [&](const std::string& kind) {
    Reply r = d.call("GET", "/v1/sandboxes/" + id + "/logs?kind=" + kind);
    EXPECT_EQ(r.status, 200) << kind << ": " << r.body;
    auto lines = jsonLines(r.body);
    for (const auto& e : lines) EXPECT_EQ(str(e, "kind"), kind) << e;
    return lines;
  };
  // Files: who, what, where and how big; never the contents.
  std::vector<std::string> files;
  for (const auto& e : ofKind("file")) {
    const auto& f = e.at("data");
    files.push_back(str(f, "op") + " " + str(f, "path") + " " + str(f, "who").substr(0, 4));
    if (str(f, "op") != "remove") {
      EXPECT_EQ(f.at("size").as_int64(), static_cast<int64_t>(kFileData.size())) << e;
    }
  }
  EXPECT_THAT(files,
              ::testing::ElementsAre("write /tmp/logged.txt ses-", "read /tmp/logged.txt ses-",
                                     "remove /tmp/logged.txt envd"));
  // The port's connection: the port, its peer, bytes each way and how long.
  auto ports = ofKind("port");
  ASSERT_EQ(ports.size(), 1u) << all.body;
  const auto& pd = ports[0].at("data");
  EXPECT_EQ(pd.at("port").as_int64(), 8080);
  EXPECT_EQ(str(pd, "who"), "ingress");
  EXPECT_EQ(str(pd, "peer"), "127.0.0.1");
  EXPECT_GT(pd.at("bytes_in").as_int64(), 0);
  EXPECT_GT(pd.at("bytes_out").as_int64(), static_cast<int64_t>(std::string("served").size()));
  EXPECT_GE(pd.at("duration_ms").as_int64(), 0);
  // The console: the line written to it, as a line of its own.
  bool marker = false;
  for (const auto& e : ofKind("console")) {
    EXPECT_LE(str(e.at("data"), "line").size(), 512u);
    marker = marker || str(e.at("data"), "line") == "vessel-console-marker";
  }
  EXPECT_TRUE(marker) << all.body;
  // The gateway's decision: the name, the verdict, why.
  bool refused = false;
  for (const auto& e : ofKind("egress")) {
    const auto& g = e.at("data");
    if (str(g, "name") != "denied.example.org") continue;
    refused = true;
    EXPECT_EQ(str(g, "flow"), "dns") << e;
    EXPECT_EQ(str(g, "verdict"), "deny") << e;
    EXPECT_NE(str(g, "reason"), "<missing>") << e;
  }
  EXPECT_TRUE(refused) << all.body;
  Reply later = d.call("GET", "/v1/sandboxes/" + id + "/logs?since=2999-01-01T00%3A00%3A00Z");
  ASSERT_EQ(later.status, 200);
  EXPECT_TRUE(later.body.empty()) << later.body;
  EXPECT_EQ(d.call("GET", "/v1/sandboxes/" + id + "/logs?kind=stdout").status, 400);
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
  CliRun cli_files = vesselCli(d, {"logs", id, "--kind", "file"});
  EXPECT_EQ(cli_files.code, 0) << cli_files.err;
  EXPECT_THAT(cli_files.out, HasSubstr("remove /tmp/logged.txt (envd)"));

  // No secret in any of it.
  std::string everything =
      all.body + streamed.body + v1.body + v2.body + cli.out + cli_cmd.out + cli_files.out;
  for (const std::string& secret :
       {d.key(), token, envd_token, kEnvSecret, kCredSecret, str(conn.js(), "token"), kFileData}) {
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
