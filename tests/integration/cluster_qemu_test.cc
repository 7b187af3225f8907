// Many machines with a real hypervisor: one `vesseld --role=node` running
// QEMU guests (TCG here) and one `--role=api` replica on a real PostgreSQL
// 15. A sandbox is created through the replica, placed on the node, runs a
// command through the node's data plane, and is deleted; the node's VM is
// gone afterwards. The other cluster tests use the fake hypervisor; this
// one shows the node role boots, restores and destroys real guests.
// Needs root, as the node role does.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <fstream>
#include <functional>
#include <thread>

#include "base/child_process.h"
#include "client/client.h"
#include "guest_env.h"
#include "http_client.h"
#include "store/store.h"
#include "store/testing/postgres_server.h"

namespace vessel {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

// Polls `done` until it holds or `limit` passes (a bound for a broken
// cluster, not a timed assertion).
bool waitUntil(const std::function<bool()>& done, std::chrono::seconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return done();
}

std::string readFile(const std::string& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

client::Client client(const std::string& url, const std::string& token) {
  client::ClientOptions o;
  o.url = url;
  o.token = token;
  o.timeout = 60s;
  return client::Client(o);
}

class ClusterQemuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    auto pg = store::testing::PostgresServer::start();
    ASSERT_TRUE(pg.ok()) << pg.error().message();
    pg_ = std::move(*pg);
    auto url = pg_->createDatabase("vessel");
    ASSERT_TRUE(url.ok()) << url.error().message();
    url_ = *url;
    std::ofstream(dir_.path() + "/node-token") << "cluster-qemu-node-token-0123456789\n";
  }
  void TearDown() override {
    // A clean stop: the node stops its VMs (--stop-vms-on-exit).
    for (auto* p : {&api_, &node_})
      if (p->running()) {
        (void)p->signal(SIGTERM);
        if (!p->waitFor(40s).ok()) (void)p->signal(SIGKILL);
      }
    pg_.reset();
  }
  // Flags both roles share: the same template cache (the replica reads the
  // manifests the node built, docs/design.md "Many machines", Not yet).
  std::vector<std::string> common(const std::string& state) const {
    return {"--no-jail",
            "--no-egress",
            "--warm-pool=none",
            "--accel=tcg",
            "--e2b-listen",
            "",
            "--e2b-envd-listen",
            "",
            "--store=" + url_,
            "--kernel=" + testing::kernelPath(),
            "--minimal-image=" + testing::minimalImage(),
            "--node-token-file=" + dir_.path() + "/node-token",
            "--state-dir=" + dir_.path() + "/" + state,
            "--cache-dir=" + dir_.path() + "/cache"};
  }
  bool spawn(std::vector<std::string> argv, const std::string& log, ChildProcess& out) {
    auto fd = Fd::open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (!fd.ok()) return false;
    SpawnOptions o;
    o.argv = std::move(argv);
    o.fds = {{fd->get(), 1}, {fd->get(), 2}};
    o.die_with_parent = true;
    auto p = ChildProcess::spawn(o);
    if (!p.ok()) return false;
    out = std::move(*p);
    return true;
  }
  std::string logs() const {
    return "--- node\n" + readFile(dir_.path() + "/node.log") + "--- api\n" +
           readFile(dir_.path() + "/api.log");
  }

  testing::ScratchDir dir_;
  std::unique_ptr<store::testing::PostgresServer> pg_;
  std::string url_;
  ChildProcess node_, api_;
};

TEST_F(ClusterQemuTest, CreateExecDeleteThroughAnApiReplica) {
  const uint16_t node_port = testing::freePort(), data_port = testing::freePort(),
                 api_port = testing::freePort();
  std::vector<std::string> node = {VESSELD_PATH,
                                   "--role=node",
                                   "--node-name=qemu0",
                                   "--stop-vms-on-exit",
                                   "--listen=127.0.0.1:1",
                                   "--node-listen=127.0.0.1:" + std::to_string(node_port),
                                   "--data-listen=127.0.0.1:" + std::to_string(data_port)};
  for (auto& a : common("node")) node.push_back(a);
  ASSERT_TRUE(spawn(node, dir_.path() + "/node.log", node_));
  // The first start builds the minimal template: one guest boot.
  ASSERT_TRUE(waitUntil(
      [&] {
        return testing::call(node_port, testing::Request{"GET", "/readyz"}).status == 200 ||
               node_.tryWait();
      },
      240s));
  ASSERT_EQ(testing::call(node_port, testing::Request{"GET", "/readyz"}).status, 200) << logs();

  std::vector<std::string> api = {VESSELD_PATH, "--role=api",
                                  "--listen=127.0.0.1:" + std::to_string(api_port)};
  for (auto& a : common("api")) api.push_back(a);
  ASSERT_TRUE(spawn(api, dir_.path() + "/api.log", api_));
  const std::string api_url = "http://127.0.0.1:" + std::to_string(api_port);
  ASSERT_TRUE(waitUntil(
      [&] {
        auto r = client(api_url, "").get("/readyz");
        return (r.ok() && r->as_object().at("live_nodes").as_int64() == 1) || api_.tryWait();
      },
      60s))
      << logs();
  std::string key = readFile(dir_.path() + "/api/dev-api-key");
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
  ASSERT_FALSE(key.empty()) << logs();
  auto c = client(api_url, key);

  auto made = c.post("/v1/sandboxes", json::object{});
  ASSERT_TRUE(made.ok()) << made.error().message() << logs();
  std::string id = testing::str(made->at("sandbox"), "id");
  std::string op = testing::str(made->at("operation"), "id");
  std::string state;
  ASSERT_TRUE(waitUntil(
      [&] {
        auto r = c.get("/v1/operations/" + op);
        state = r.ok() ? testing::str(*r, "state") : "";
        return state == "done" || state == "failed";
      },
      120s));
  ASSERT_EQ(state, "done") << logs();

  // Exec in the guest, through the node's own data plane.
  auto s = c.post("/v1/sandboxes/" + id + "/sessions", json::object{});
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(testing::str(*s, "data_url"), "http://127.0.0.1:" + std::to_string(data_port));
  auto dp = client(testing::str(*s, "data_url"), testing::str(*s, "token"));
  json::object body{{"cmd", json::array{"/bin/sh", "-c", "echo from-$(uname -s)"}}};
  auto r = dp.request("POST", "/v1/exec", json::serialize(body), "application/json");
  ASSERT_TRUE(r.ok()) << r.error().message();
  std::string out;
  for (const auto& e : testing::parseSse(r->body))
    if (e.type == "stdout") out += testing::unbase64(testing::str(e.data, "data"));
  EXPECT_EQ(out, "from-Linux\n") << r->body;

  auto del = c.del("/v1/sandboxes/" + id);
  ASSERT_TRUE(del.ok()) << del.error().message();
  std::string dop = testing::str(del->at("operation"), "id");
  ASSERT_TRUE(waitUntil(
      [&] {
        auto o = c.get("/v1/operations/" + dop);
        state = o.ok() ? testing::str(*o, "state") : "";
        return state == "done" || state == "failed";
      },
      60s));
  EXPECT_EQ(state, "done") << logs();
  // The node holds nothing any more (its heartbeat says so).
  auto st = store::openPostgres(url_);
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(waitUntil(
      [&] {
        auto n = (*st)->listNodes();
        return n.ok() && n->size() == 1 && (*n)[0].sandboxes == 0;
      },
      30s))
      << logs();
}

}  // namespace
}  // namespace vessel
