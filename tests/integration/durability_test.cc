// Durability of vesseld, end to end with a real daemon and real guests:
// kill -9 in the middle of creates and a restart that takes over what
// survived; many creates while list and get keep answering; the reaper;
// quotas. One daemon (and one template build) for the binary.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <set>
#include <thread>

#include "agentclient/agent_client.h"
#include "base/fd.h"
#include "base/run_blocking.h"
#include "base/sha256.h"
#include "guest_env.h"
#include "os/command.h"
#include "os/netns.h"
#include "store/store.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::str;

testing::ScratchDir* g_dir = nullptr;
testing::Vesseld* d = nullptr;

class DurabilityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_dir = new testing::ScratchDir;
    // Without egress: VMs have no network slot (NetworkedVmsAreTakenOver-
    // WithTheirSlots turns egress on).
    testing::VesseldOptions o{VESSELD_PATH,
                              testing::kernelPath(),
                              testing::minimalImage(),
                              g_dir->path(),
                              {"--no-egress", "--warm-pool=none"}};
    d = new testing::Vesseld(o);
    d->keepVmsOnStop(true);                  // restarts here are about VMs that outlive vesseld
    d->setContract(testing::apiContract());  // every reply against api/openapi.yaml
    ASSERT_TRUE(d->start()) << d->log();
  }
  static void TearDownTestSuite() {
    // Whatever a failed test left goes, so no VM outlives the suite.
    testing::endSuite(d);
    delete g_dir;
    g_dir = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(d && d->running()) << "vesseld is not running"; }

  std::pair<std::string, std::string> create(const std::string& body = "{}") {
    auto r = d->call("POST", "/v1/sandboxes", body);
    EXPECT_EQ(r.status, 202) << r.body;
    auto v = r.js();
    if (!v.is_object()) return {};
    return {str(v.at("sandbox"), "id"), str(v.at("operation"), "id")};
  }
  json::value get(const std::string& id) { return d->call("GET", "/v1/sandboxes/" + id).js(); }
  std::string act(const std::string& id, const std::string& verb) {
    auto r = d->call("POST", "/v1/sandboxes/" + id + ":" + verb);
    EXPECT_EQ(r.status, 202) << verb << " " << id << ": " << r.body;
    if (r.status != 202) return "<" + std::to_string(r.status) + ">";
    return d->finish(str(r.js().at("operation"), "id"));
  }
  void destroy(const std::string& id) {
    auto r = d->call("DELETE", "/v1/sandboxes/" + id);
    ASSERT_EQ(r.status, 202) << r.body;
    EXPECT_EQ(d->finish(str(r.js().at("operation"), "id")), "done") << d->log();
  }
  json::value record(const std::string& id) {
    auto text = readFile(d->stateDir() + "/runtime/sandboxes/" + id + "/sandbox.json");
    if (!text.ok()) return {};
    boost::system::error_code ec;
    return json::parse(*text, ec);
  }
};

// Runs `cmd` in a guest through its agent socket, as vesseld would: only
// while no vesseld holds the channel.
std::string execThroughAgent(const std::string& vm_dir, const std::string& cmd) {
  asio::io_context io;
  asio::local::stream_protocol::socket sock(io);
  boost::system::error_code ec;
  sock.connect(asio::local::stream_protocol::endpoint(vm_dir + "/run/agent.sock"), ec);
  if (ec) return "<connect: " + ec.message() + ">";
  auto c = runBlocking(io, agentclient::AgentClient::reconnect(
                               std::move(sock), "test", std::chrono::steady_clock::now() + 30s));
  if (!c.ok()) return "<reconnect: " + c.error().message() + ">";
  agentclient::ExecSpec spec;
  spec.shell = cmd;
  auto r = runBlocking(io, (*c)->run(spec));
  (*c)->close();
  if (!r.ok()) return "<exec: " + r.error().message() + ">";
  return r->out;
}

TEST_F(DurabilityTest, KillNineInTheMiddleOfCreatesLosesNothing) {
  auto [a, op_a] = create();
  auto [b, op_b] = create();
  ASSERT_EQ(d->finish(op_a), "done") << d->log();
  ASSERT_EQ(d->finish(op_b), "done") << d->log();
  std::vector<std::pair<std::string, std::string>> inflight;
  for (int i = 0; i < 3; ++i) inflight.push_back(create());
  d->kill9();

  // B's VM dies while no vesseld is watching.
  auto rec_b = record(b);
  ASSERT_TRUE(rec_b.is_object());
  int pid_b = static_cast<int>(rec_b.at("vm_pid").to_number<int64_t>());
  ASSERT_EQ(::kill(pid_b, SIGKILL), 0);
  for (int i = 0; i < 100 && ::kill(pid_b, 0) == 0; ++i) std::this_thread::sleep_for(50ms);

  ASSERT_TRUE(d->start()) << d->log();
  // No operation is left pending or running: each ended one way or the other.
  for (auto& [id, op] : inflight) {
    auto o = d->call("GET", "/v1/operations/" + op).js();
    EXPECT_THAT(str(o, "state"), AnyOf("done", "failed")) << op;
    auto s = get(id);
    if (str(o, "state") == "done") {
      EXPECT_EQ(str(s, "state"), "running");
    } else {
      EXPECT_EQ(str(s, "state"), "failed");
      EXPECT_THAT(str(s, "error"), HasSubstr("restarted")) << id;
    }
  }
  // A was taken over; B is failed with a reason.
  EXPECT_EQ(str(get(a), "state"), "running") << d->log();
  auto sb = get(b);
  EXPECT_EQ(str(sb, "state"), "failed");
  EXPECT_THAT(str(sb, "error"), HasSubstr("could not be taken over"));

  // A's VM really is back under control: pause (QMP + agent) and resume.
  EXPECT_EQ(act(a, "pause"), "done") << d->log();
  EXPECT_EQ(act(a, "resume"), "done") << d->log();

  // And its guest answers a command through its agent: once more without a
  // vesseld (kill -9 again), then a third vesseld takes it over again.
  d->kill9();
  auto rec_a = record(a);
  ASSERT_TRUE(rec_a.is_object());
  EXPECT_EQ(execThroughAgent(std::string(rec_a.at("vm_dir").as_string()), "echo alive"), "alive\n");
  ASSERT_TRUE(d->start()) << d->log();
  EXPECT_EQ(str(get(a), "state"), "running") << d->log();

  destroy(a);
  destroy(b);
  for (auto& [id, op] : inflight) destroy(id);
  // Every QEMU is accounted for: adopted ones stopped by delete, those of
  // unfinished creates stopped by the restart.
  EXPECT_THAT(d->qemuPids(), ::testing::IsEmpty());
}

TEST_F(DurabilityTest, ACleanRestartKeepsRunningSandboxesRunning) {
  auto [a, op] = create();
  ASSERT_EQ(d->finish(op), "done") << d->log();
  auto e = d->stop();
  ASSERT_TRUE(e.exited && e.code == 0) << e.describe();
  EXPECT_EQ(d->qemuPids().size(), 1u) << "the VM outlives a clean stop";
  ASSERT_TRUE(d->start()) << d->log();
  EXPECT_EQ(str(get(a), "state"), "running");
  EXPECT_EQ(act(a, "pause"), "done") << d->log();
  destroy(a);
}

// This daemon's network slot namespaces ("<prefix>-<i>"; not "-gw").
std::set<std::string> slotNamespaces() {
  std::string p = "v" + sha256Hex(d->stateDir()).substr(0, 4) + "-";
  std::set<std::string> out;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind(p, 0) == 0 && n != p + "gw") out.insert(n);
  }
  return out;
}

// The gateway part of /healthz.
json::object gatewayHealth() {
  auto h = d->call("GET", "/healthz", "", "").js();
  if (!h.is_object() || !h.as_object().contains("gateway")) return {};
  return h.at("gateway").as_object();
}

TEST_F(DurabilityTest, NetworkedVmsAreTakenOverWithTheirSlots) {
  // With egress a VM's tap lives in a network slot (a namespace, nft rules,
  // an element in the gateway's table, a policy registered with the
  // gateway). A restart, kill -9 or clean, takes the slot over with the
  // VM and registers the policy with the new gateway; slots of VMs that did
  // not survive are removed. A slot found incomplete stops its VM.
  d->extraArgs() = {"--warm-pool=none"};
  // However this test ends, the next ones get the daemon they expect.
  struct Restore {
    ~Restore() {
      if (d->running()) (void)d->stop();
      d->extraArgs() = {"--no-egress", "--warm-pool=none"};
      EXPECT_TRUE(d->start()) << d->log();
      EXPECT_THAT(slotNamespaces(), ::testing::IsEmpty()) << "a run without egress removes them";
    }
  } restore;
  auto e = d->stop();
  ASSERT_TRUE(e.exited && e.code == 0) << e.describe();
  ASSERT_TRUE(d->start()) << d->log();

  // Networked on purpose: a create without a policy gets none.
  auto [a, op_a] = create(R"({"network":{"mode":"full"}})");
  auto [p, op_p] = create(R"({"network":{"mode":"full"}})");
  ASSERT_EQ(d->finish(op_a), "done") << d->log();
  ASSERT_EQ(d->finish(op_p), "done") << d->log();
  EXPECT_EQ(act(p, "pause"), "done") << d->log();
  auto rec = record(a);
  ASSERT_TRUE(rec.is_object() && rec.as_object().contains("network_slot")) << rec;
  std::string slot_ns = "v" + sha256Hex(d->stateDir()).substr(0, 4) + "-" +
                        std::to_string(rec.at("network_slot").to_number<int>());
  // A process that must outlive both restarts, and the guest's route.
  std::string pid = d->sh(a, "sleep 3600 >/dev/null 2>&1 & echo $!");
  ASSERT_FALSE(pid.empty());
  while (!pid.empty() && pid.back() == '\n') pid.pop_back();
  std::string route = d->sh(a, "ip route show default");
  ASSERT_THAT(route, HasSubstr("default via")) << route;
  auto qemu = d->qemuPids();
  ASSERT_EQ(qemu.size(), 1u);

  auto takenOver = [&](const char* how) {
    SCOPED_TRACE(how);
    auto sa = get(a);
    EXPECT_EQ(str(sa, "state"), "running") << sa << d->log();
    EXPECT_EQ(d->qemuPids(), qemu) << "the same QEMU serves it";
    EXPECT_EQ(d->sh(a, "kill -0 " + pid + " && echo alive"), "alive\n");
    EXPECT_EQ(d->sh(a, "ip route show default"), route);
    EXPECT_TRUE(slotNamespaces().count(slot_ns)) << "its slot is kept";
    auto gw = gatewayHealth();
    EXPECT_EQ(gw["sandboxes"], json::value(1)) << gw << ": its policy is registered again";
    EXPECT_EQ(gw["slots_attached"], json::value(1)) << gw;
    // The slot's element is back in the gateway's table (its filter lets
    // only registered slot sources reach the gateway).
    std::string prefix = "v" + sha256Hex(d->stateDir()).substr(0, 4);
    auto set = os::runCommand(os::inNetns(
        prefix + "-gw", {"nft", "list", "set", "ip", "vessel_gw_" + prefix, "slot_sources"}));
    ASSERT_TRUE(set.ok()) << set.error().message();
    EXPECT_THAT(set->out, HasSubstr(prefix + "h" + slot_ns.substr(prefix.size() + 1))) << set->out;
    // Nothing else is left: every slot namespace is the taken-over one or
    // one of the pool's ready ones (the old ready ones were removed).
    for (int i = 0; i < 100; ++i) {
      gw = gatewayHealth();
      if (slotNamespaces().size() == static_cast<size_t>(gw["slots_ready"].to_number<int>() + 1))
        break;
      std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(slotNamespaces().size(), static_cast<size_t>(gw["slots_ready"].to_number<int>() + 1))
        << gw;
  };
  d->kill9();
  ASSERT_TRUE(d->start()) << d->log();
  takenOver("after kill -9");
  e = d->stop();
  ASSERT_TRUE(e.exited && e.code == 0) << e.describe();
  EXPECT_EQ(d->qemuPids(), qemu) << "the VM outlives a clean stop";
  EXPECT_TRUE(slotNamespaces().count(slot_ns)) << "and so does its slot";
  ASSERT_TRUE(d->start()) << d->log();
  takenOver("after a clean stop");
  EXPECT_EQ(str(get(p), "state"), "paused");
  EXPECT_EQ(act(p, "resume"), "done") << d->log();
  EXPECT_THAT(d->sh(p, "ip route show default"), HasSubstr("default via"));

  // kill -9 in the middle of two creates: each ends running (taken over
  // with its slot) or failed, and no slot is left without a VM.
  auto [c1, op_c1] = create();
  auto [c2, op_c2] = create();
  d->kill9();
  ASSERT_TRUE(d->start()) << d->log();
  int running = 2;  // a and p
  for (const auto& c : {c1, c2}) {
    std::string st = str(get(c), "state");
    EXPECT_THAT(st, ::testing::AnyOf("running", "failed")) << c;
    if (st == "running") ++running;
  }
  json::object gw;
  for (int i = 0; i < 100; ++i) {
    gw = gatewayHealth();
    if (slotNamespaces().size() ==
        static_cast<size_t>(gw["slots_ready"].to_number<int>() + running))
      break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(gw["slots_attached"], json::value(running)) << gw;
  EXPECT_EQ(slotNamespaces().size(),
            static_cast<size_t>(gw["slots_ready"].to_number<int>() + running))
      << gw;
  EXPECT_EQ(d->qemuPids().size(), static_cast<size_t>(running));
  destroy(c1);
  destroy(c2);

  // A slot that is gone when vesseld comes back: the VM cannot keep a
  // network it was promised, so it is stopped and the sandbox failed.
  d->kill9();
  ASSERT_TRUE(os::runCommand({"ip", "netns", "delete", slot_ns}).ok());
  ASSERT_TRUE(d->start()) << d->log();
  auto sa = get(a);
  EXPECT_EQ(str(sa, "state"), "failed");
  EXPECT_THAT(str(sa, "error"), HasSubstr("network slot")) << sa;
  EXPECT_EQ(str(get(p), "state"), "running") << "the other one is taken over";
  EXPECT_EQ(d->qemuPids().size(), 1u);
  destroy(p);
  EXPECT_EQ(gatewayHealth()["slots_attached"], json::value(0));
}

TEST_F(DurabilityTest, SixteenConcurrentCreatesWhileListAndGetKeepAnswering) {
  std::vector<std::pair<std::string, std::string>> made;
  for (int i = 0; i < 16; ++i) made.push_back(create());
  // While the creates run: every list holds all sixteen, every get answers
  // with a legal state for a sandbox being created.
  std::set<std::string> ids;
  for (auto& [id, op] : made) ids.insert(id);
  ASSERT_EQ(ids.size(), 16u) << "ids are unique";
  int rounds = 0;
  for (; rounds < 2000; ++rounds) {
    auto l = d->call("GET", "/v1/sandboxes?page_size=100");
    ASSERT_EQ(l.status, 200) << l.body;
    std::set<std::string> seen;
    int running = 0;
    auto body = l.js();  // named: a range-for over a temporary's member dangles
    for (auto& s : body.at("sandboxes").as_array()) {
      seen.insert(str(s, "id"));
      EXPECT_THAT(str(s, "state"), AnyOf("creating", "running")) << str(s, "error");
      running += str(s, "state") == "running";
    }
    for (auto& id : ids) ASSERT_TRUE(seen.count(id)) << id;
    auto one = d->call("GET", "/v1/sandboxes/" + made[rounds % 16].first);
    ASSERT_EQ(one.status, 200);
    if (running == 16) break;
  }
  EXPECT_GT(rounds, 0);
  for (auto& [id, op] : made) EXPECT_EQ(d->finish(op), "done") << d->log();
  for (auto& [id, op] : made) destroy(id);
  EXPECT_THAT(d->qemuPids(), ::testing::IsEmpty());
}

TEST_F(DurabilityTest, TheReaperEndsAnIdleSandbox) {
  auto [id, op] = create(R"({"timeout":2})");
  ASSERT_EQ(d->finish(op), "done") << d->log();
  // The global stream shows why it went, then its delete operation ends.
  auto ev = d->call("GET", "/v1/events", "", "-", {}, [&](const std::string& b) {
    for (auto& e : testing::parseSse(b))
      if (e.type == "operation.done" && str(e.data, "sandbox_id") == id &&
          str(e.data, "kind") == "delete")
        return true;
    return false;
  });
  bool expired = false;
  for (auto& e : testing::parseSse(ev.body))
    if (e.type == "sandbox.expired" && str(e.data, "id") == id) {
      expired = true;
      EXPECT_EQ(str(e.data, "reason"), "idle");
    }
  EXPECT_TRUE(expired) << ev.body;
  EXPECT_EQ(d->call("GET", "/v1/sandboxes/" + id).status, 404);
  auto m = d->call("GET", "/metrics", "", "");
  EXPECT_THAT(m.body, HasSubstr("vessel_sandboxes_expired_total{reason=\"idle\"} 1"));
}

TEST_F(DurabilityTest, QuotasAnswer429AndExtendMovesTheDeadlines) {
  // A tenant with small limits, written beside the daemon as `vessel
  // tenant create` would; its one paused sandbox is a record only.
  auto db = store::openSqlite(d->stateDir() + "/vessel.db");
  ASSERT_TRUE(db.ok());
  std::string key = "vsk_quota-tenant-key";
  ASSERT_TRUE((*db)->createTenant("tq", "quota").ok());
  ASSERT_TRUE((*db)->addApiKey("tq", sha256Hex(key)).ok());
  ASSERT_TRUE((*db)->setTenantLimits("tq", {1, 200}).ok());
  store::SandboxRecord paused{"sb-q1", "tq", "minimal", store::SandboxState::kPaused, "", 1, 256};
  paused.created_ms = store::nowMs();
  paused.expires_ms = paused.created_ms + 3600 * 1000;
  ASSERT_TRUE((*db)->insertSandbox(paused).ok());

  auto r = d->call("POST", "/v1/sandboxes", "{}", key);
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(str(r.js(), "code"), "resource_exhausted");
  EXPECT_THAT(str(r.js(), "message"), HasSubstr("1 of at most 1 sandboxes"));
  ASSERT_TRUE((*db)->setTenantLimits("tq", {5, 200}).ok());
  r = d->call("POST", "/v1/sandboxes", "{}", key);
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_THAT(str(r.js(), "message"), HasSubstr("MiB"));
  // Resuming would need memory the tenant does not have either.
  r = d->call("POST", "/v1/sandboxes/sb-q1:resume", "", key);
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(str(d->call("GET", "/v1/sandboxes/sb-q1", "", key).js(), "state"), "paused");
  EXPECT_THAT(d->qemuPids(), ::testing::IsEmpty());

  r = d->call("POST", "/v1/sandboxes/sb-q1:extend", R"({"timeout":30,"lifetime":7200})", key);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.js().at("timeout").to_number<int64_t>(), 30);
  EXPECT_NE(str(r.js(), "expires_at"), "<missing>");
  EXPECT_EQ(d->call("POST", "/v1/sandboxes/sb-q1:extend", R"({"lifetime":99999999})", key).status,
            400);
  EXPECT_EQ(d->call("POST", "/v1/sandboxes/sb-q1:extend", "{}", key).status, 400);
  EXPECT_EQ(d->call("POST", "/v1/sandboxes/sb-q1:extend", R"({"timeout":"x"})", key).status, 400);
  EXPECT_EQ(d->call("POST", "/v1/sandboxes/sb-q1:extend", R"({"timeout":5})").status, 404)
      << "another tenant's sandbox does not exist for the dev tenant";
  ASSERT_TRUE((*db)->setSandboxState("sb-q1", store::SandboxState::kDeleted, "").ok());
}

// Every error body is the contract's Error: {code, message, details?,
// request_id}, code from its enum, the id its X-Request-Id header's,
// nothing else.
void expectErrorShape(const testing::Reply& r, const std::string& what) {
  static const std::set<std::string> kCodes = {
      "invalid_argument",   "not_found",         "already_exists", "failed_precondition",
      "resource_exhausted", "deadline_exceeded", "unavailable",    "protocol",
      "permission_denied",  "unauthenticated",   "internal"};
  auto v = r.js();
  ASSERT_TRUE(v.is_object()) << what << ": " << r.body;
  for (auto& [k, f] : v.as_object()) {
    EXPECT_TRUE(k == "code" || k == "message" || k == "details" || k == "request_id")
        << what << ": field " << k;
    if (k == "details") {
      EXPECT_TRUE(f.is_object()) << what;
    }
  }
  std::string id = str(v, "request_id");
  EXPECT_NE(id, "<missing>") << what << ": " << r.body;
  EXPECT_THAT(r.head, HasSubstr("X-Request-Id: " + id)) << what;
  EXPECT_TRUE(kCodes.count(str(v, "code"))) << what << ": " << r.body;
  EXPECT_NE(str(v, "message"), "<missing>") << what;
  EXPECT_THAT(r.head, HasSubstr("application/json")) << what;
}

TEST_F(DurabilityTest, BadInputGetsTheRightJsonErrorAndLeaksNothing) {
  struct Case {
    std::string method, target, body, key;
    int status;
    std::vector<std::string> headers = {};
  };
  std::vector<Case> cases = {
      {"POST", "/v1/sandboxes", "{\"template\":", "-", 400},
      {"POST", "/v1/sandboxes", "\"just a string\"", "-", 400},
      {"POST", "/v1/sandboxes", R"({"timeout":-1})", "-", 400},
      {"POST", "/v1/sandboxes", R"({"timeout":1.5})", "-", 400},
      {"POST", "/v1/sandboxes", R"({"lifetime":0})", "-", 400},
      {"POST", "/v1/sandboxes", R"({"lifetime":99999999})", "-", 400},
      {"POST", "/v1/sandboxes", R"({"env":{"A":1}})", "-", 400},
      {"POST", "/v1/sandboxes", R"({"metadata":[]})", "-", 400},
      {"POST", "/v1/sandboxes", R"({"template":"no-such-template"})", "-", 404},
      {"POST", "/v1/sandboxes", "{\"env\":" + std::string(20, '[') + "}", "-", 400},
      // Refused on the header alone, before any body is read.
      {"PATCH", "/v1/sandboxes", "", "-", 413, {"Content-Length: 2097152"}},
      {"GET", "/v1/sandboxes", "", "-", 431, {"X-Big: " + std::string(17000, 'a')}},
      {"GET", "/v1/sandboxes/SB_UPPER", "", "-", 400},
      {"GET", "/v1/sandboxes/" + std::string(100, 'a'), "", "-", 400},
      {"POST", "/v1/sandboxes/sb-000000000000:extend", R"({"timeout":5})", "-", 404},
      {"GET", "/v1/operations/op-../../x", "", "-", 404},
      {"GET", "/v1/sandboxes", "", "", 401},
      {"GET", "/v1/sandboxes", "", "vsk_not-a-key", 401},
      {"GET", "/v1/sandboxes", "", "", 401, {"Authorization: Basic Zm9vOmJhcg=="}},
      {"PUT", "/v1/sandboxes", "", "-", 405},
  };
  for (const auto& c : cases) {
    std::string what = c.method + " " + c.target.substr(0, 60);
    auto r = d->call(c.method, c.target, c.body, c.key, c.headers);
    EXPECT_EQ(r.status, c.status) << what << ": " << r.body.substr(0, 300);
    expectErrorShape(r, what);
  }
  // Still serving, nothing created, no VM started by any of it.
  EXPECT_EQ(d->call("GET", "/healthz", "", "").status, 200);
  auto list = d->call("GET", "/v1/sandboxes");
  ASSERT_EQ(list.status, 200);
  EXPECT_TRUE(list.js().at("sandboxes").as_array().empty()) << list.body;
  EXPECT_THAT(d->qemuPids(), ::testing::IsEmpty());
  auto m = d->call("GET", "/metrics", "", "");
  EXPECT_THAT(m.body,
              HasSubstr("vessel_api_errors_total{plane=\"control\",code=\"invalid_argument\"}"));
  EXPECT_THAT(m.body, HasSubstr("vessel_sandboxes{state=\"running\"}"));
}

}  // namespace
}  // namespace vessel
