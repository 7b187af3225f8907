// The public API end to end: a real vesseld, real HTTP, real guests. One
// daemon (and one template build) for the whole binary; each test boots at
// most one sandbox. A second tenant is added straight into the daemon's
// store, as `vessel tenant create` will.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>
#include <fstream>
#include <thread>

#include "base/child_process.h"
#include "base/sha256.h"
#include "guest_env.h"
#include "store/store.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::ScratchDir;

using testing::parseSse;
using testing::Reply;
using testing::SseEvent;
using testing::str;

struct Shared {
  std::unique_ptr<testing::Vesseld> d;
  std::string key2;
};
Shared* g = nullptr;

// One request on its own connection; reads until the server closes or
// `enough` says the body holds what the caller wants (bounded reads).
Reply call(const std::string& method, const std::string& target, const std::string& body = "",
           const std::string& key = "-", std::vector<std::string> headers = {},
           const std::function<bool(const std::string&)>& enough = nullptr) {
  return g->d->call(method, target, body, key, headers, enough);
}

// Follows an operation's events to its end (the server closes the stream).
std::vector<SseEvent> opEvents(const std::string& op, int64_t after = 0,
                               const std::string& key = "-") {
  std::vector<std::string> h;
  if (after) h.push_back("Last-Event-ID: " + std::to_string(after));
  Reply r = call("GET", "/v1/operations/" + op + "/events", "", key, h);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.head, HasSubstr("text/event-stream"));
  return parseSse(r.body);
}

// Waits for an operation through its event stream and returns its final state.
std::string finish(const std::string& op, const std::string& key = "-") {
  auto ev = opEvents(op, 0, key);
  if (ev.empty()) return "<no events>";
  EXPECT_THAT(ev.back().type, ::testing::AnyOf("operation.done", "operation.failed"));
  return str(ev.back().data, "state");
}

class ApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g = new Shared;
    // The second tenant's keys are an operator's (GET /v1/nodes).
    g->d = std::make_unique<testing::Vesseld>(VESSELD_PATH,
                                              std::vector<std::string>{"--operator-tenant=t2"});
    // Every reply below is checked against api/openapi.yaml.
    g->d->setContract(testing::apiContract());
    std::string state = g->d->stateDir();
    ASSERT_TRUE(g->d->start()) << "vesseld did not come up; log:\n" << readLog();
    ASSERT_THAT(g->d->key(), ::testing::StartsWith("vsk_"));
    struct stat st {};
    ASSERT_EQ(::stat((state + "/dev-api-key").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_THAT(readLog(), HasSubstr(g->d->key())) << "the key is printed once at first start";
    // A second tenant, added beside the running daemon (WAL allows it).
    auto db = store::openSqlite(state + "/vessel.db");
    ASSERT_TRUE(db.ok()) << db.error().message();
    g->key2 = "vsk_second-tenant-key";
    ASSERT_TRUE((*db)->createTenant("t2", "second").ok());
    ASSERT_TRUE((*db)->addApiKey("t2", sha256Hex(g->key2)).ok());
  }
  static void TearDownTestSuite() {
    if (!g) return;
    if (g->d->running()) {
      auto e = g->d->stop();
      EXPECT_TRUE(e.exited && e.code == 0) << e.describe() << "\n" << readLog();
    }
    EXPECT_THAT(testing::qemuProcessesUsing(g->d->root()), ::testing::IsEmpty());
    delete g;
    g = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(g && !g->d->key().empty()) << "vesseld did not start"; }
  static std::string readLog() { return g->d->log(); }
  // POST /v1/sandboxes, checked; returns {sandbox id, operation id}.
  std::pair<std::string, std::string> create(const std::string& body = "{}") {
    Reply r = call("POST", "/v1/sandboxes", body);
    EXPECT_EQ(r.status, 202) << r.body;
    auto v = r.js();
    if (!v.is_object()) return {};
    EXPECT_EQ(str(v.at("sandbox"), "state"), "creating");
    EXPECT_EQ(str(v.at("operation"), "kind"), "create");
    return {str(v.at("sandbox"), "id"), str(v.at("operation"), "id")};
  }
  std::string state(const std::string& id) {
    return str(call("GET", "/v1/sandboxes/" + id).js(), "state");
  }
  void destroy(const std::string& id) {
    Reply d = call("DELETE", "/v1/sandboxes/" + id);
    ASSERT_EQ(d.status, 202) << d.body;
    EXPECT_EQ(finish(str(d.js().at("operation"), "id")), "done");
    EXPECT_EQ(call("GET", "/v1/sandboxes/" + id).status, 404);
  }
};

TEST_F(ApiTest, LifeOfASandbox) {
  auto [id, op] = create(R"({"template":"minimal","metadata":{"owner":"ci"},"env":{"A":"1"}})");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(finish(op), "done") << readLog();
  Reply got = call("GET", "/v1/sandboxes/" + id);
  ASSERT_EQ(got.status, 200);
  auto sb = got.js();
  EXPECT_EQ(str(sb, "state"), "running");
  EXPECT_EQ(str(sb, "template"), "minimal");
  EXPECT_EQ(str(sb.at("metadata"), "owner"), "ci");
  EXPECT_EQ(str(call("GET", "/v1/operations/" + op).js(), "state"), "done");
  EXPECT_THAT(call("GET", "/v1/sandboxes").body, HasSubstr(id));
  EXPECT_FALSE(sb.as_object().contains("node")) << "one machine names no node";
  // What its VM uses, measured on the host.
  Reply m = call("GET", "/v1/sandboxes/" + id + "/metrics");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.js().at("cpu_count").as_int64(), 1);
  EXPECT_EQ(m.js().at("mem_total_bytes").as_int64(), int64_t{256} << 20);
  EXPECT_GT(m.js().at("mem_used_bytes").as_int64(), 0);
  EXPECT_GE(m.js().at("disk_total_bytes").as_int64(), int64_t{1} << 30);

  // Illegal in this state: 409 naming the state.
  Reply bad = call("POST", "/v1/sandboxes/" + id + ":resume");
  EXPECT_EQ(bad.status, 409);
  EXPECT_EQ(str(bad.js(), "code"), "failed_precondition");
  EXPECT_EQ(str(bad.js().at("details"), "state"), "running");

  Reply p = call("POST", "/v1/sandboxes/" + id + ":pause");
  ASSERT_EQ(p.status, 202) << p.body;
  EXPECT_EQ(str(p.js().at("sandbox"), "state"), "pausing");
  EXPECT_EQ(finish(str(p.js().at("operation"), "id")), "done") << readLog();
  EXPECT_EQ(state(id), "paused");
  EXPECT_EQ(call("POST", "/v1/sandboxes/" + id + ":pause").status, 409);
  Reply pm = call("GET", "/v1/sandboxes/" + id + "/metrics");
  EXPECT_EQ(pm.status, 409) << "no VM while paused: " << pm.body;

  Reply r = call("POST", "/v1/sandboxes/" + id + ":resume");
  ASSERT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(finish(str(r.js().at("operation"), "id")), "done") << readLog();
  EXPECT_EQ(state(id), "running");
  destroy(id);
  EXPECT_THAT(call("GET", "/v1/sandboxes").body, ::testing::Not(HasSubstr(id)));
}

TEST_F(ApiTest, TenantsSeeOnlyTheirOwn) {
  auto [id, op] = create();
  ASSERT_FALSE(id.empty());
  // The second tenant cannot see or touch it, and cannot tell it exists.
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + id, "", g->key2).status, 404);
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + id, "", g->key2).status, 404);
  EXPECT_EQ(call("POST", "/v1/sandboxes/" + id + ":pause", "", g->key2).status, 404);
  EXPECT_EQ(call("GET", "/v1/operations/" + op, "", g->key2).status, 404);
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + id + "/metrics", "", g->key2).status, 404);
  EXPECT_EQ(call("GET", "/v1/operations/" + op + "/events", "", g->key2).status, 404);
  EXPECT_THAT(call("GET", "/v1/sandboxes", "", g->key2).body, ::testing::Not(HasSubstr(id)));
  EXPECT_EQ(finish(op), "done") << readLog();
  // Its global stream holds none of the first tenant's events: a marker
  // event of its own, stored after all of them, is the first thing it sees.
  auto db = store::openSqlite(g->d->stateDir() + "/vessel.db");
  ASSERT_TRUE(db.ok());
  store::EventRecord marker{0, "t2", "op-marker", "sb-marker", "test.marker"};
  ASSERT_TRUE((*db)->appendEvent(marker).ok());
  Reply ev = call("GET", "/v1/events", "", g->key2, {},
                  [](const std::string& b) { return b.find("test.marker") != std::string::npos; });
  EXPECT_EQ(ev.status, 200);
  auto seen = parseSse(ev.body);
  ASSERT_EQ(seen.size(), 1u) << ev.body;
  EXPECT_EQ(seen[0].type, "test.marker");
  destroy(id);
}

// Nodes are an operator's to see: the second tenant is one here, the
// development tenant is not.
TEST_F(ApiTest, OnlyAnOperatorsKeyListsNodes) {
  Reply denied = call("GET", "/v1/nodes");
  EXPECT_EQ(denied.status, 403) << denied.body;
  EXPECT_THAT(str(denied.js(), "message"), HasSubstr("--operator-tenant"));
  EXPECT_EQ(call("GET", "/v1/nodes", "", "vsk_nobody").status, 401);
  Reply r = call("GET", "/v1/nodes", "", g->key2);
  ASSERT_EQ(r.status, 200) << r.body;
  json::value body = r.js();
  const auto& nodes = body.at("nodes").as_array();
  ASSERT_EQ(nodes.size(), 1u) << "one machine is its one node";
  const auto& n = nodes[0];
  EXPECT_FALSE(str(n, "name").empty());
  EXPECT_EQ(str(n, "state"), "ready");
  EXPECT_THAT(str(n, "accel"), ::testing::AnyOf("kvm", "tcg"));
  EXPECT_GT(n.at("memory_mib").as_int64(), 0);
  EXPECT_LE(n.at("memory_free_mib").as_int64(), n.at("memory_mib").as_int64());
  EXPECT_GE(n.at("vcpus").as_int64(), 1);
  EXPECT_THAT(json::serialize(n.at("templates")), HasSubstr("\"minimal\""));
}

TEST_F(ApiTest, EventsComeInOrderAndResumeFromLastEventId) {
  auto [id, op] = create();
  ASSERT_FALSE(id.empty());
  auto all = opEvents(op);
  ASSERT_GE(all.size(), 4u);
  std::vector<std::string> types;
  for (size_t i = 0; i < all.size(); ++i) {
    types.push_back(all[i].type);
    if (i) {
      EXPECT_LT(all[i - 1].id, all[i].id);
    }
  }
  EXPECT_THAT(types, ::testing::ElementsAre("operation.pending", "operation.running",
                                            "sandbox.state", "operation.done"));
  EXPECT_EQ(str(all[2].data, "state"), "running");
  // Resuming after the first event replays exactly the rest.
  auto rest = opEvents(op, all[0].id);
  ASSERT_EQ(rest.size(), all.size() - 1);
  for (size_t i = 0; i < rest.size(); ++i) EXPECT_EQ(rest[i].id, all[i + 1].id);
  // The global stream has the same events, in the same order, and resumes too.
  size_t want = all.size() - 1;
  Reply g1 = call("GET", "/v1/events", "", "-", {"Last-Event-ID: " + std::to_string(all[0].id)},
                  [&](const std::string& b) { return parseSse(b).size() >= want; });
  auto global = parseSse(g1.body);
  ASSERT_GE(global.size(), want);
  for (size_t i = 0; i < want; ++i) EXPECT_EQ(global[i].id, all[i + 1].id);
  // A delete's events arrive live on a stream opened before it.
  Reply d = call("DELETE", "/v1/sandboxes/" + id);
  ASSERT_EQ(d.status, 202);
  std::string dop = str(d.js().at("operation"), "id");
  auto dev = opEvents(dop);
  ASSERT_FALSE(dev.empty());
  EXPECT_EQ(dev.back().type, "operation.done");
  EXPECT_GT(dev.front().id, all.back().id);
}

TEST_F(ApiTest, BadInputGetsAJsonErrorWithTheRightStatus) {
  std::string listed_before = call("GET", "/v1/sandboxes?page_size=100").body;
  struct Case {
    std::string method, target, body, key;
    int status;
    std::string code;
  };
  std::vector<Case> cases = {
      {"GET", "/v1/sandboxes", "", "", 401, "unauthenticated"},
      {"GET", "/v1/sandboxes", "", "vsk_wrong", 401, "unauthenticated"},
      {"POST", "/v1/sandboxes", "{not json", "-", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", "[1,2]", "-", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", R"({"template":5})", "-", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", R"({"vcpus":"two"})", "-", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", R"({"vcpus":7})", "-", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", R"({"bogus":1})", "-", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", R"({"env":{"1BAD":"x"}})", "-", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", R"({"template":"nope"})", "-", 404, "not_found"},
      {"GET", "/v1/sandboxes/..%2Fetc", "", "-", 400, "invalid_argument"},
      {"GET", "/v1/sandboxes/sb-000000000000", "", "-", 404, "not_found"},
      {"POST", "/v1/sandboxes/sb-000000000000:pause", "", "-", 404, "not_found"},
      {"POST", "/v1/sandboxes/sb-000000000000:explode", "", "-", 404, "not_found"},
      {"GET", "/v1/sandboxes?page_size=0", "", "-", 400, "invalid_argument"},
      {"GET", "/v1/sandboxes?colour=red", "", "-", 400, "invalid_argument"},
      {"GET", "/v1/operations/op-000000000000", "", "-", 404, "not_found"},
      {"GET", "/v1/nothing", "", "-", 404, "not_found"},
  };
  for (const auto& c : cases) {
    Reply r = call(c.method, c.target, c.body, c.key);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.target << ": " << r.body;
    EXPECT_EQ(str(r.js(), "code"), c.code) << c.method << " " << c.target;
    EXPECT_NE(str(r.js(), "message"), "<missing>") << c.target;
  }
  // A method the path does not have: 405, and Allow says which it has.
  struct Wrong {
    std::string method, target, allow;
  };
  for (const auto& w :
       std::vector<Wrong>{{"PATCH", "/v1/sandboxes", "GET, POST"},
                          {"PUT", "/v1/sandboxes/sb-000000000000", "GET, DELETE"},
                          {"GET", "/v1/sandboxes/sb-000000000000:pause", "POST"},
                          {"DELETE", "/v1/operations/op-000000000000", "GET"},
                          {"POST", "/v1/templates/x", "DELETE"},
                          {"POST", "/v1/templates/x/y", ""},
                          {"PUT", "/v1/credentials", "GET, POST"},
                          {"POST", "/v1/sandboxes/sb-000000000000/network", "GET, PUT"}}) {
    Reply r = call(w.method, w.target);
    if (w.allow.empty()) {
      EXPECT_EQ(r.status, 404) << w.method << " " << w.target << ": " << r.body;
      continue;
    }
    EXPECT_EQ(r.status, 405) << w.method << " " << w.target << ": " << r.body;
    EXPECT_EQ(r.header("Allow"), w.allow) << w.method << " " << w.target;
    EXPECT_EQ(str(r.js(), "code"), "invalid_argument") << r.body;
  }
  Reply bad_id = call("GET", "/v1/events", "", "-", {"Last-Event-ID: abc"});
  EXPECT_EQ(bad_id.status, 400);
  // The daemon is still serving and nothing was created by any of it.
  EXPECT_EQ(call("GET", "/healthz", "", "").status, 200);
  EXPECT_EQ(call("GET", "/v1/sandboxes?page_size=100").body, listed_before);
}

// Every control-plane operation, refused before it does anything: without
// an API key (401) and, where it takes an id, with a malformed one (400).
// No guests; the point is that the contract declares each of these answers.
TEST_F(ApiTest, EveryOperationRefusesAsDeclared) {
  struct Op {
    std::string method, target, body;
  };
  const std::string bad = "..%2Fetc";
  std::vector<Op> with_id = {
      {"GET", "/v1/sandboxes/{id}", ""},
      {"DELETE", "/v1/sandboxes/{id}", ""},
      {"POST", "/v1/sandboxes/{id}:pause", ""},
      {"POST", "/v1/sandboxes/{id}:resume", ""},
      {"POST", "/v1/sandboxes/{id}:fork", "{}"},
      {"POST", "/v1/sandboxes/{id}:extend", R"({"timeout":5})"},
      {"POST", "/v1/sandboxes/{id}/sessions", ""},
      {"GET", "/v1/sandboxes/{id}/network", ""},
      {"PUT", "/v1/sandboxes/{id}/network", R"({"mode":"full"})"},
      {"GET", "/v1/operations/{id}", ""},
      {"GET", "/v1/operations/{id}/events", ""},
  };
  std::vector<Op> without_id = {
      {"POST", "/v1/sandboxes", "{}"},
      {"GET", "/v1/sandboxes", ""},
      {"POST", "/v1/credentials",
       R"({"name":"x","hosts":["a.example"],"header":"X-K","value":"v"})"},
      {"GET", "/v1/credentials", ""},
      {"DELETE", "/v1/credentials/nope", ""},
      {"POST", "/v1/templates", R"({"name":"x"})"},
      {"GET", "/v1/templates", ""},
      {"GET", "/v1/events", ""},
  };
  auto with = [](std::string t, const std::string& id) {
    if (auto at = t.find("{id}"); at != std::string::npos) t.replace(at, 4, id);
    return t;
  };
  for (const auto& o : with_id)
    without_id.push_back({o.method, with(o.target, "sb-000000000000"), o.body});
  for (const auto& o : without_id) {
    Reply r = call(o.method, o.target, o.body, "");
    EXPECT_EQ(r.status, 401) << o.method << " " << o.target << ": " << r.body;
    EXPECT_EQ(str(r.js(), "code"), "unauthenticated") << o.method << " " << o.target;
  }
  for (const auto& o : with_id) {
    Reply r = call(o.method, with(o.target, bad), o.body);
    EXPECT_EQ(r.status, 400) << o.method << " " << o.target << ": " << r.body;
    EXPECT_EQ(str(r.js(), "code"), "invalid_argument") << o.method << " " << o.target;
  }
}

// This daemon runs with egress (the default), so its running sandbox has a
// network slot: a clean stop leaves the VM and its slot for the next
// vesseld, which takes both over (durability_test covers kill -9 and a
// slot found incomplete).
TEST_F(ApiTest, RestartKeepsRunningAndPausedSandboxes) {
  // This suite's daemon stops its VMs when it stops (the harness's
  // default); this test needs one that does not, as vesseld by default.
  g->d->keepVmsOnStop(true);
  {
    auto e = g->d->stop();
    ASSERT_TRUE(e.exited && e.code == 0) << e.describe() << "\n" << readLog();
    ASSERT_TRUE(g->d->start()) << readLog();
    g->d->keepVmsOnStop(false);  // from the next start: no VM outlives the suite
  }
  // Networked on purpose (the route is checked below): a create without a
  // policy gets the node's default, none.
  auto [running, op1] = create(R"({"network":{"mode":"full"}})");
  auto [paused, op2] = create(R"({"network":{"mode":"full"}})");
  ASSERT_EQ(finish(op1), "done");
  ASSERT_EQ(finish(op2), "done");
  Reply p = call("POST", "/v1/sandboxes/" + paused + ":pause");
  ASSERT_EQ(p.status, 202);
  ASSERT_EQ(finish(str(p.js().at("operation"), "id")), "done");
  ASSERT_EQ(g->d->sh(running, "echo before > /tmp/mark && echo ok"), "ok\n");

  auto e = g->d->stop();
  ASSERT_TRUE(e.exited && e.code == 0) << e.describe() << "\n" << readLog();
  EXPECT_EQ(testing::qemuProcessesUsing(g->d->root()).size(), 1u)
      << "the running sandbox's VM outlives the stop; the warm pool's do not";
  ASSERT_TRUE(g->d->start()) << readLog();

  // The running one runs on, its files and network intact; the paused one
  // resumes as if nothing happened.
  EXPECT_EQ(state(running), "running") << readLog();
  EXPECT_EQ(g->d->sh(running, "cat /tmp/mark"), "before\n");
  EXPECT_THAT(g->d->sh(running, "ip route show default"), HasSubstr("default via"));
  EXPECT_EQ(state(paused), "paused");
  std::string log = readLog();
  EXPECT_EQ(log.find(g->d->key()), log.rfind(g->d->key()))
      << "the dev key is printed only at first start";
  Reply r = call("POST", "/v1/sandboxes/" + paused + ":resume");
  ASSERT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(finish(str(r.js().at("operation"), "id")), "done") << readLog();
  EXPECT_EQ(state(paused), "running");
  destroy(running);
  destroy(paused);
}

TEST_F(ApiTest, ListPagesThroughEverySandboxOnce) {
  // Records of a third tenant, written beside the daemon: paging needs no guests.
  auto db = store::openSqlite(g->d->stateDir() + "/vessel.db");
  ASSERT_TRUE(db.ok());
  std::string key3 = "vsk_third-tenant-key";
  ASSERT_TRUE((*db)->createTenant("t3", "third").ok());
  ASSERT_TRUE((*db)->addApiKey("t3", sha256Hex(key3)).ok());
  for (const char* id : {"sb-p1", "sb-p2", "sb-p3"}) {
    store::SandboxRecord r{id, "t3", "minimal", store::SandboxState::kFailed, "test"};
    r.metadata = std::string(id) == "sb-p2"
                     ? std::map<std::string, std::string>{{"team", "b"}}
                     : std::map<std::string, std::string>{{"team", "a b"}, {"x", "1"}};
    ASSERT_TRUE((*db)->insertSandbox(r).ok());
  }
  std::vector<std::string> seen;
  std::string token;
  for (int page = 0; page < 5; ++page) {
    Reply r = call("GET", "/v1/sandboxes?page_size=2&page_token=" + token, "", key3);
    ASSERT_EQ(r.status, 200) << r.body;
    auto v = r.js();
    EXPECT_LE(v.at("sandboxes").as_array().size(), 2u);
    for (auto& s : v.at("sandboxes").as_array()) seen.push_back(str(s, "id"));
    token = str(v, "next_page_token");
    if (token.empty()) break;
  }
  EXPECT_THAT(seen, ::testing::ElementsAre("sb-p1", "sb-p2", "sb-p3"));
  EXPECT_EQ(str(call("GET", "/v1/sandboxes/sb-p2", "", key3).js(), "error"), "test");

  // A metadata filter (percent-encoded values), paged: only matches, each once.
  seen.clear();
  token.clear();
  for (int page = 0; page < 5; ++page) {
    Reply r =
        call("GET", "/v1/sandboxes?metadata.team=a%20b&page_size=1&page_token=" + token, "", key3);
    ASSERT_EQ(r.status, 200) << r.body;
    auto v = r.js();  // named: a range-for over a temporary's member dangles
    for (auto& s : v.at("sandboxes").as_array()) seen.push_back(str(s, "id"));
    token = str(v, "next_page_token");
    if (token.empty()) break;
  }
  EXPECT_THAT(seen, ::testing::ElementsAre("sb-p1", "sb-p3"));
  Reply both = call("GET", "/v1/sandboxes?metadata.team=b&metadata.x=1", "", key3);
  EXPECT_EQ(both.js().at("sandboxes").as_array().size(), 0u) << both.body;
  Reply bad = call("GET", "/v1/sandboxes?metadatax=1", "", key3);
  EXPECT_EQ(bad.status, 400) << bad.body;
}

}  // namespace
}  // namespace vessel
