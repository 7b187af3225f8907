// Many machines, end to end (issue 15): one real PostgreSQL, three
// `vesseld --role=node` processes each in its own network namespace (a
// "host" with a veth on a bridge this test makes), and two `--role=api`
// replicas. The nodes run the fake hypervisor (its "VMs" are the real
// agent on the host), so the test is about the cluster, not guest boots.
//
// Creates spread over the nodes and exec reaches each through its own data
// plane; one node is killed with SIGKILL and another's link is cut: creates
// keep succeeding on the third, nothing stays pending, and the sandboxes
// of the lost nodes are failed with the reason. When the nodes return,
// they reconcile and the store and the nodes agree. An API replica killed
// in the middle of operations: the other one ends every one of them.
// Needs root (namespaces, veth, bridge).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "base/child_process.h"
#include "base/sha256.h"
#include "client/client.h"
#include "e2b/envd/connect.h"
#include "e2b/envd/signature.h"
#include "guest_env.h"
#include "http_client.h"
#include "hypervisor/testing/fake_hypervisor.h"
#include "store/store.h"
#include "store/testing/postgres_server.h"
#include "templates/store.h"

namespace vessel {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

constexpr int kNodes = 3;
constexpr int kApis = 2;
const std::string kToken = "cluster-test-node-token-0123456789";

bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

// Polls `done` (each poll is a store or HTTP read) until it holds or `limit`
// passes; false on timeout. Nothing here is timed: the bound only keeps a
// broken cluster from hanging the test.
bool waitUntil(const std::function<bool()>& done, std::chrono::seconds limit = 30s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return done();
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    sfx_ = std::to_string(::getpid() % 100000);
    net_ = "10.213." + std::to_string(::getpid() % 250) + ".";
    dir_ = std::make_unique<testing::ScratchDir>();
    bridge_ = "vcb" + sfx_;
    ASSERT_TRUE(sh("ip link add " + bridge_ + " type bridge")) << "bridge";
    ASSERT_TRUE(sh("ip addr add " + net_ + "1/24 dev " + bridge_));
    ASSERT_TRUE(sh("ip link set " + bridge_ + " up"));
    for (int i = 0; i < kNodes; ++i) {
      std::string ns = netns(i), v = "vcv" + sfx_ + std::to_string(i);
      ASSERT_TRUE(sh("ip netns add " + ns));
      ASSERT_TRUE(sh("ip link add " + v + " type veth peer name eth0 netns " + ns));
      ASSERT_TRUE(sh("ip link set " + v + " master " + bridge_ + " up"));
      ASSERT_TRUE(sh("ip -n " + ns + " addr add " + ip(i) + "/24 dev eth0"));
      ASSERT_TRUE(sh("ip -n " + ns + " link set eth0 up"));
      ASSERT_TRUE(sh("ip -n " + ns + " link set lo up"));
    }
    store::testing::PostgresServerOptions po;
    po.tcp_address = net_ + "1";
    po.tcp_port = static_cast<uint16_t>(20000 + ::getpid() % 20000);
    auto pg = store::testing::PostgresServer::start(po);
    ASSERT_TRUE(pg.ok()) << pg.error().message();
    pg_ = std::move(*pg);
    auto url = pg_->createDatabase("vessel");
    ASSERT_TRUE(url.ok()) << url.error().message();
    url_ = *url;
    auto s = store::openPostgres(url_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    token_file_ = dir_->path() + "/node-token";
    std::ofstream(token_file_) << kToken << "\n";
    for (int i = 0; i < kNodes; ++i) ASSERT_TRUE(startNode(i)) << logs();
    for (int i = 0; i < kApis; ++i) ASSERT_TRUE(startApi(i)) << logs();
    ASSERT_TRUE(waitUntil([&] { return !readFile(dir_->path() + "/api0/dev-api-key").empty(); }));
    key_ = readFile(dir_->path() + "/api0/dev-api-key");
    while (!key_.empty() && std::isspace(static_cast<unsigned char>(key_.back()))) key_.pop_back();
  }
  void TearDown() override {
    for (auto& p : apis_) p = ChildProcess();
    for (auto& p : nodes_) p = ChildProcess();
    store_.reset();
    pg_.reset();
    if (!sfx_.empty()) {
      for (int i = 0; i < kNodes; ++i) sh("ip netns del " + netns(i));
      sh("ip link del " + bridge_);
    }
  }

  std::string netns(int i) const { return "vcn" + sfx_ + "-" + std::to_string(i); }
  std::string ip(int i) const { return net_ + std::to_string(11 + i); }
  std::string nodeName(int i) const { return "node" + std::to_string(i); }
  static std::string readFile(const std::string& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::vector<std::string> common(const std::string& state) const {
    return {"--hypervisor=fake",
            "--fake-agent=" + std::string(VESSEL_AGENT_BINARY),
            "--no-jail",
            "--no-egress",
            "--warm-pool=none",
            "--kernel=" + testing::kernelPath(),
            "--minimal-image=" + testing::minimalImage(),
            "--node-token-file=" + token_file_,
            "--state-dir=" + dir_->path() + "/" + state,
            "--cache-dir=" + dir_->path() + "/" + state + "-cache"};
  }
  bool startNode(int i) {
    // Over TCP across the bridge: cutting the node's link cuts its store
    // too. tcp_user_timeout: a write into a dead link fails in seconds.
    std::string store = pg_->tcpUrl("vessel") +
                        "?tcp_user_timeout=3000&connect_timeout=3&keepalives_idle=1"
                        "&keepalives_interval=1&keepalives_count=2";
    std::vector<std::string> argv = {"ip",         "netns",       "exec",         netns(i),
                                     VESSELD_PATH, "--role=node", "--e2b-listen", ""};
    for (auto& a : common("node" + std::to_string(i))) argv.push_back(a);
    for (std::string a :
         {"--store=" + store, "--node-name=" + nodeName(i), "--node-listen=" + ip(i) + ":8091",
          "--data-listen=" + ip(i) + ":8081", std::string("--listen=127.0.0.1:1"),
          "--e2b-envd-listen=" + ip(i) + ":49983"})
      argv.push_back(a);
    if (!spawn(argv, dir_->path() + "/node" + std::to_string(i) + ".log", nodes_[i])) return false;
    return waitUntil([&] {
      auto r = client("http://" + ip(i) + ":8091", "").get("/readyz");
      return r.ok();
    });
  }
  bool startApi(int i) {
    api_ports_[i] = testing::freePort();
    e2b_ports_[i] = testing::freePort();
    envd_ports_[i] = testing::freePort();
    std::vector<std::string> argv = {
        VESSELD_PATH,
        "--role=api",
        "--store=" + url_,
        "--listen=127.0.0.1:" + std::to_string(api_ports_[i]),
        "--e2b-listen=127.0.0.1:" + std::to_string(e2b_ports_[i]),
        "--e2b-envd-listen=127.0.0.1:" + std::to_string(envd_ports_[i]),
        "--node-lost-after=4"};
    for (auto& a : common("api" + std::to_string(i))) argv.push_back(a);
    if (!spawn(argv, dir_->path() + "/api" + std::to_string(i) + ".log", apis_[i])) return false;
    return waitUntil([&] { return client(apiUrl(i), "").get("/readyz").ok(); });
  }
  bool spawn(const std::vector<std::string>& argv, const std::string& log, ChildProcess& out) {
    auto fd = Fd::open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (!fd.ok()) return false;
    SpawnOptions o;
    o.argv = argv;
    o.fds = {{fd->get(), 1}, {fd->get(), 2}};
    o.die_with_parent = true;
    auto p = ChildProcess::spawn(o);
    if (!p.ok()) return false;
    out = std::move(*p);
    return true;
  }
  std::string apiUrl(int i) const { return "http://127.0.0.1:" + std::to_string(api_ports_[i]); }
  static client::Client client(const std::string& url, const std::string& token) {
    client::ClientOptions o;
    o.url = url;
    o.token = token;
    o.timeout = 20s;
    return client::Client(o);
  }
  std::string logs() const {
    std::string s;
    for (const char* n : {"node0", "node1", "node2", "api0", "api1"})
      s += std::string("--- ") + n + "\n" + readFile(dir_->path() + "/" + n + ".log");
    return s;
  }

  // POST /v1/sandboxes on replica `api`: {sandbox id, operation id}.
  std::pair<std::string, std::string> create(int api) {
    auto r = client(apiUrl(api), key_).post("/v1/sandboxes", json::object{});
    if (!r.ok()) {
      ADD_FAILURE() << "create: " << r.error().message();
      return {};
    }
    return {testing::str(r->at("sandbox"), "id"), testing::str(r->at("operation"), "id")};
  }
  // POST /v1/sandboxes of `tmpl`: {sandbox id, operation id}.
  std::pair<std::string, std::string> createOf(int api, const std::string& tmpl) {
    auto r = client(apiUrl(api), key_).post("/v1/sandboxes", json::object{{"template", tmpl}});
    if (!r.ok()) {
      ADD_FAILURE() << "create " << tmpl << ": " << r.error().message();
      return {};
    }
    return {testing::str(r->at("sandbox"), "id"), testing::str(r->at("operation"), "id")};
  }
  std::string opJson(int api, const std::string& op) {
    auto r = client(apiUrl(api), key_).get("/v1/operations/" + op);
    return r.ok() ? json::serialize(*r) : r.error().message();
  }
  std::string opState(int api, const std::string& op) {
    auto r = client(apiUrl(api), key_).get("/v1/operations/" + op);
    return r.ok() ? testing::str(*r, "state") : "";
  }
  bool finished(int api, const std::string& op) {
    auto s = opState(api, op);
    return s == "done" || s == "failed";
  }
  std::optional<store::SandboxRecord> row(const std::string& id) {
    auto r = store_->getSandbox("dev", id);
    return r.ok() ? *r : std::nullopt;
  }
  std::map<std::string, store::NodeRecord> nodeRows() {
    std::map<std::string, store::NodeRecord> out;
    if (auto n = store_->listNodes(); n.ok())
      for (auto& r : *n) out[r.name] = r;
    return out;
  }
  // `echo` through the sandbox's node's own data plane.
  std::string echo(int api, const std::string& id, const std::string& word) {
    auto s = client(apiUrl(api), key_).post("/v1/sandboxes/" + id + "/sessions", json::object{});
    if (!s.ok()) return "session: " + s.error().message();
    auto dp = client(testing::str(*s, "data_url"), testing::str(*s, "token"));
    json::object body{{"cmd", json::array{"/bin/echo", word}}};
    auto r = dp.request("POST", "/v1/exec", json::serialize(body), "application/json");
    if (!r.ok()) return "exec: " + r.error().message();
    std::string out;
    for (const auto& e : testing::parseSse(r->body))
      if (e.type == "stdout") out += testing::unbase64(testing::str(e.data, "data"));
    return out;
  }

  // The E2B REST API of replica `api` (the native key as a bearer token).
  testing::Reply e2b(int api, const std::string& method, const std::string& target,
                     const std::string& body = "") {
    testing::Request r;
    r.method = method;
    r.target = target;
    r.body = body;
    r.bearer = key_;
    return testing::call(e2b_ports_[api], r);
  }
  // `"stopped"` when the replica does not answer.
  std::string reaperOf(int api) {
    auto r = client(apiUrl(api), "").get("/readyz");
    if (!r.ok()) return "stopped";
    auto* v = r->as_object().if_contains("reaper");
    return v && v->is_bool() && v->as_bool() ? "reaper" : "not";
  }
  int expiredEvents(const std::string& id) {
    int n = 0;
    if (auto ev = store_->listEvents("dev", "", 0, 10000); ev.ok())
      for (const auto& e : *ev) n += e.sandbox_id == id && e.type == "sandbox.expired";
    return n;
  }

  std::string sfx_, net_, bridge_, url_, token_file_, key_;
  std::unique_ptr<testing::ScratchDir> dir_;
  std::unique_ptr<store::testing::PostgresServer> pg_;
  std::unique_ptr<store::Store> store_;
  ChildProcess nodes_[kNodes];
  ChildProcess apis_[kApis];
  uint16_t api_ports_[kApis] = {};
  uint16_t e2b_ports_[kApis] = {};
  uint16_t envd_ports_[kApis] = {};
};

TEST_F(ClusterTest, PlacesRoutesSurvivesNodeLossAndReplicaLoss) {
  // Creates through both replicas spread over the three nodes.
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    auto [id, op] = create(i % kApis);
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(waitUntil([&] { return finished(i % kApis, op); })) << logs();
    ASSERT_EQ(opState((i + 1) % kApis, op), "done") << logs();  // either replica answers
    ids.push_back(id);
  }
  std::map<std::string, std::vector<std::string>> on;
  for (const auto& id : ids) on[row(id)->node].push_back(id);
  ASSERT_EQ(on.size(), 3u) << logs();
  for (int i = 0; i < kNodes; ++i) {
    ASSERT_EQ(on[nodeName(i)].size(), 2u) << nodeName(i);
    const auto& id = on[nodeName(i)][0];
    EXPECT_EQ(echo(i % kApis, id, "hello-" + id), "hello-" + id + "\n") << logs();
  }

  // node0 dies; node1's link is cut.
  (void)nodes_[0].signal(SIGKILL);
  (void)nodes_[0].waitFor(10s);
  ASSERT_TRUE(sh("ip -n " + netns(1) + " link set eth0 down"));
  ASSERT_TRUE(waitUntil([&] {
    auto n = nodeRows();
    return n["node0"].lost && n["node1"].lost;
  })) << logs();
  for (int i : {0, 1})
    for (const auto& id : on[nodeName(i)]) {
      ASSERT_TRUE(waitUntil([&] { return row(id)->state == store::SandboxState::kFailed; }))
          << id << logs();
      EXPECT_EQ(row(id)->error, "node " + nodeName(i) + " lost");
    }
  // Creates keep succeeding, on the node that is left.
  for (int i = 0; i < 4; ++i) {
    auto [id, op] = create(i % kApis);
    ASSERT_TRUE(waitUntil([&] { return finished(0, op); })) << logs();
    EXPECT_EQ(opState(0, op), "done") << logs();
    EXPECT_EQ(row(id)->node, "node2");
    on["node2"].push_back(id);
  }
  EXPECT_EQ(echo(1, on["node2"].back(), "still"), "still\n");
  // Deleting a sandbox of a lost node ends (the node destroys it on return).
  {
    auto r = client(apiUrl(0), key_).del("/v1/sandboxes/" + on["node1"][1]);
    ASSERT_TRUE(r.ok()) << r.error().message();
    ASSERT_TRUE(waitUntil([&] { return finished(0, testing::str(r->at("operation"), "id")); }));
  }
  ASSERT_TRUE(waitUntil([&] {
    auto u = store_->listUnfinishedOperations();
    return u.ok() && u->empty();
  })) << "operations stayed pending\n"
      << logs();

  // Both come back: node0 restarts on its state dir, node1's link is up.
  ASSERT_TRUE(startNode(0)) << logs();
  ASSERT_TRUE(sh("ip -n " + netns(1) + " link set eth0 up"));
  // Consistent: each node runs exactly the sandboxes the store places on
  // it (node1 destroyed its fake VMs of failed sandboxes on reconciling).
  ASSERT_TRUE(waitUntil([&] {
    auto n = nodeRows();
    for (int i = 0; i < kNodes; ++i) {
      auto live = store_->listNodeSandboxes(nodeName(i));
      if (n[nodeName(i)].lost || !live.ok() ||
          n[nodeName(i)].sandboxes != static_cast<int64_t>(live->size()))
        return false;
    }
    return true;
  })) << logs();
  EXPECT_EQ(store_->listNodeSandboxes("node0")->size(), 0u);
  EXPECT_EQ(store_->listNodeSandboxes("node1")->size(), 0u);
  EXPECT_EQ(store_->listNodeSandboxes("node2")->size(), on["node2"].size());
  // New creates may land on the returned nodes again.
  std::string owner0;  // replica 0's id, as its operations record it
  {
    auto [id, op] = create(0);
    ASSERT_TRUE(waitUntil([&] { return finished(0, op); }));
    EXPECT_EQ(opState(0, op), "done") << logs();
    owner0 = (*store_->getOperation("dev", op))->owner;
    ASSERT_FALSE(owner0.empty());
  }

  // Replica 1 dies with operations in flight: the nodes are frozen for a
  // moment (SIGSTOP, shorter than --node-lost-after) so that none of its
  // calls can end before it is killed. Replica 0 takes every one over and
  // ends it from what the nodes then hold.
  for (auto& n : nodes_) ASSERT_TRUE(n.signal(SIGSTOP).ok());
  std::vector<std::pair<std::string, std::string>> mid;
  for (int i = 0; i < 3; ++i) mid.push_back(create(1));
  {
    auto r = client(apiUrl(1), key_).del("/v1/sandboxes/" + on["node2"][0]);
    ASSERT_TRUE(r.ok()) << r.error().message();
    mid.emplace_back(on["node2"][0], testing::str(r->at("operation"), "id"));
  }
  (void)apis_[1].signal(SIGKILL);
  (void)apis_[1].waitFor(10s);
  for (auto& n : nodes_) ASSERT_TRUE(n.signal(SIGCONT).ok());
  for (const auto& [id, op] : mid) {
    ASSERT_TRUE(waitUntil([&] { return finished(0, op); })) << op << logs();
    EXPECT_EQ((*store_->getOperation("dev", op))->owner, owner0) << "not taken over: " << op;
    auto sb = row(id);
    ASSERT_TRUE(sb.has_value());
    if (opState(0, op) == "done")
      EXPECT_TRUE(sb->state == store::SandboxState::kRunning ||
                  sb->state == store::SandboxState::kDeleted)
          << store::stateName(sb->state);
    else
      EXPECT_EQ(sb->state, store::SandboxState::kFailed) << op << logs();
  }
  auto u = store_->listUnfinishedOperations();
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->empty());
}

std::string percentEncoded(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", c);
      out += b;
    }
  }
  return out;
}

// One keep-alive connection to a replica's envd listener, as an E2B SDK
// holds one to E2B_SANDBOX_URL: each request is answered by the envd of
// the node running the sandbox it names.
class EnvdConnection {
 public:
  explicit EnvdConnection(uint16_t port) : sock_(io_) {
    sock_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  }
  boost::beast::http::response<boost::beast::http::string_body> send(
      boost::beast::http::request<boost::beast::http::string_body> req) {
    if (req[boost::beast::http::field::host].empty())
      req.set(boost::beast::http::field::host, "127.0.0.1");
    req.prepare_payload();
    boost::beast::http::write(sock_, req);
    boost::beast::http::response<boost::beast::http::string_body> res;
    boost::system::error_code ec;
    boost::beast::http::read(sock_, buf_, res, ec);
    if (ec) res.result(0);
    return res;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket sock_;
  boost::beast::flat_buffer buf_;
};

boost::beast::http::request<boost::beast::http::string_body> envdCall(const std::string& target,
                                                                      const std::string& id,
                                                                      const std::string& token,
                                                                      const std::string& ctype,
                                                                      std::string body) {
  boost::beast::http::request<boost::beast::http::string_body> r{boost::beast::http::verb::post,
                                                                 target, 11};
  if (!id.empty()) r.set("E2b-Sandbox-Id", id);
  if (!token.empty()) r.set("X-Access-Token", token);
  r.set(boost::beast::http::field::authorization, "Basic cm9vdDo=");  // root
  r.set(boost::beast::http::field::content_type, ctype);
  r.body() = std::move(body);
  return r;
}

// E2B on many machines: envd requests through a replica reach the node of
// the sandbox they name (by header, by Host, by a signed URL's signature),
// interleaved on one connection, with tokens any replica hands out; a
// network change and usage through a replica are the node's answers; and
// the reaper runs on exactly one replica, then on the other once it dies.
TEST_F(ClusterTest, EnvdNetworkUsageAndTheReaperThroughReplicas) {
  std::vector<std::string> ids;
  std::map<std::string, std::string> token;
  for (int i = 0; i < kNodes; ++i) {
    // Through one replica: it spreads a burst before the nodes report it.
    auto [id, op] = create(0);
    ASSERT_TRUE(waitUntil([&] { return finished(0, op); })) << logs();
    ASSERT_EQ(opState(0, op), "done") << logs();
    ids.push_back(id);
    // The token from either replica: every process shares the key.
    auto got = e2b(i % kApis, "GET", "/sandboxes/" + id);
    ASSERT_EQ(got.status, 200) << got.body;
    token[id] = testing::str(got.js(), "envdAccessToken");
  }
  std::set<std::string> nodes;
  for (const auto& id : ids) nodes.insert(row(id)->node);
  ASSERT_EQ(nodes.size(), 3u) << "one sandbox per node";

  EnvdConnection conn(envd_ports_[0]);
  const std::string files = dir_->path() + "/envd-files";
  std::filesystem::create_directories(files);
  for (int round = 0; round < 2; ++round)
    for (const auto& id : ids) {
      // A Connect unary call.
      auto st = conn.send(envdCall("/filesystem.Filesystem/Stat", id, token[id], "application/json",
                                   R"({"path":"/"})"));
      ASSERT_EQ(st.result_int(), 200) << id << ": " << st.body() << logs();
      EXPECT_NE(st.body().find("\"entry\""), std::string::npos) << st.body();
      // A server stream: the process's output, then its end.
      json::object start{
          {"process",
           json::object{{"cmd", "/bin/sh"}, {"args", json::array{"-c", "echo started; exit 7"}}}}};
      auto ps =
          conn.send(envdCall("/process.Process/Start", id, token[id], "application/connect+json",
                             e2b::envd::encodeEnvelope(0, json::serialize(start))));
      ASSERT_EQ(ps.result_int(), 200) << ps.body();
      EXPECT_NE(ps.body().find("exit status 7"), std::string::npos) << ps.body();
    }
  // A wrong token is refused by the node, as on one machine.
  auto wrong = conn.send(envdCall("/filesystem.Filesystem/Stat", ids[0], token[ids[1]],
                                  "application/json", R"({"path":"/"})"));
  EXPECT_EQ(wrong.result_int(), 401) << wrong.body();
  // Named by Host: an upload, then a download by a signed URL that names
  // no sandbox (its signature says which), through the other replica.
  {
    EnvdConnection other(envd_ports_[1]);
    const std::string& id = ids[2];
    std::string path = files + "/by-" + id;
    std::string mp =
        "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\nfrom " +
        id + "\r\n--XyZ--\r\n";
    auto up = envdCall("/files?username=root&path=" + percentEncoded(path), "", token[id],
                       "multipart/form-data; boundary=XyZ", mp);
    up.set(boost::beast::http::field::host, "49983-" + id + ".vessel.test");
    auto put = other.send(std::move(up));
    ASSERT_EQ(put.result_int(), 200) << put.body() << logs();
    std::string sig = e2b::envd::fileSignature(path, "read", "root", token[id], std::nullopt);
    boost::beast::http::request<boost::beast::http::string_body> get{
        boost::beast::http::verb::get,
        "/files?path=" + percentEncoded(path) + "&username=root&signature=" + percentEncoded(sig),
        11};
    auto got = other.send(std::move(get));
    ASSERT_EQ(got.result_int(), 200) << got.body();
    EXPECT_EQ(got.body(), "from " + id);
  }

  // Network settings and usage, through either replica, from the node.
  {
    auto r = client(apiUrl(1), key_)
                 .put("/v1/sandboxes/" + ids[0] + "/network", json::object{{"mode", "none"}});
    ASSERT_TRUE(r.ok()) << r.error().message() << logs();
    EXPECT_EQ(testing::str(*r, "mode"), "none");
    // The node runs without egress: only "none" (its refusal, not the replica's).
    auto full = client(apiUrl(0), key_)
                    .put("/v1/sandboxes/" + ids[0] + "/network", json::object{{"mode", "full"}});
    ASSERT_FALSE(full.ok());
    EXPECT_NE(full.error().message().find("without egress"), std::string::npos)
        << full.error().message();
    auto m = e2b(0, "GET", "/sandboxes/" + ids[1] + "/metrics");
    ASSERT_EQ(m.status, 200) << m.body << logs();
    ASSERT_TRUE(m.js().is_array() && m.js().as_array().size() == 1) << m.body;
    EXPECT_GT(m.js().as_array()[0].as_object().at("memUsed").to_number<double>(), 0) << m.body;
  }

  // The reaper: exactly one replica runs it.
  int reaper = -1;
  ASSERT_TRUE(waitUntil([&] {
    auto a = reaperOf(0), b = reaperOf(1);
    if (a == "reaper" && b == "not") reaper = 0;
    if (a == "not" && b == "reaper") reaper = 1;
    return reaper >= 0;
  })) << logs();
  auto shortLived = [&](int api) {
    auto r = client(apiUrl(api), key_).post("/v1/sandboxes", json::object{{"lifetime", 2}});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
    return r.ok() ? testing::str(r->at("sandbox"), "id") : std::string();
  };
  std::string first = shortLived(1 - reaper);
  ASSERT_TRUE(waitUntil([&] { return row(first)->state == store::SandboxState::kDeleted; }))
      << logs();
  EXPECT_EQ(expiredEvents(first), 1);
  // The reaping replica dies; the other takes over once it is silent.
  (void)apis_[reaper].signal(SIGKILL);
  (void)apis_[reaper].waitFor(10s);
  int other = 1 - reaper;
  std::string second = shortLived(other);
  ASSERT_TRUE(waitUntil([&] { return row(second)->state == store::SandboxState::kDeleted; }))
      << logs();
  EXPECT_EQ(expiredEvents(second), 1);
  EXPECT_EQ(reaperOf(other), "reaper");

  // A process stream through the surviving replica whose node dies under
  // it: the client's connection is cut, with no end of the stream, as
  // envd's own would be (the SDK then reports the sandbox gone).
  {
    const std::string& id = ids[0];
    int victim = -1;
    for (int i = 0; i < kNodes; ++i)
      if (row(id)->node == nodeName(i)) victim = i;
    ASSERT_GE(victim, 0);
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket sock(io);
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), envd_ports_[other]});
    json::object start{
        {"process",
         json::object{{"cmd", "/bin/sh"}, {"args", json::array{"-c", "echo up; exec sleep 60"}}}}};
    auto req = envdCall("/process.Process/Start", id, token[id], "application/connect+json",
                        e2b::envd::encodeEnvelope(0, json::serialize(start)));
    req.set(boost::beast::http::field::host, "127.0.0.1");
    req.prepare_payload();
    boost::beast::http::write(sock, req);
    boost::beast::flat_buffer buf;
    boost::beast::http::response_parser<boost::beast::http::string_body> p;
    boost::beast::http::read_header(sock, buf, p);
    ASSERT_EQ(p.get().result_int(), 200);
    // The output arrives while the process runs: the stream is open.
    while (p.get().body().find("start") == std::string::npos)
      boost::beast::http::read_some(sock, buf, p);
    (void)nodes_[victim].signal(SIGKILL);
    (void)nodes_[victim].waitFor(10s);
    boost::system::error_code ec;
    boost::beast::http::read(sock, buf, p, ec);
    EXPECT_TRUE(ec) << "the stream ended cleanly although its node died";
    EXPECT_FALSE(p.is_done());
  }
}

// Templates in a cluster: the API replicas hold no template files (the
// catalogue is in the store); a template on one node only is copied to
// another on first use and checked; a corrupted source is refused with
// nothing installed; a fork into a template through a replica runs on the
// sandbox's node, and the other replica creates from it at once. (Builds
// through a replica: ClusterNodeTest; the fake hypervisor cannot build.)
TEST_F(ClusterTest, TemplatesAreCopiedCheckedAndForkedThroughReplicas) {
  // "solo" on node0 only, so large (a number only, to the fake) that one
  // sandbox of it fills a node: the next create must go to another node.
  uint64_t host_mib = 0;
  {
    std::ifstream in("/proc/meminfo");
    std::string k;
    uint64_t kib = 0;
    while (in >> k >> kib && k != "MemTotal:") in.ignore(256, '\n');
    host_mib = kib / 1024;
  }
  ASSERT_GT(host_mib, 0u);
  const uint64_t big = host_mib / 2 + 1;
  store::TenantLimits lim;
  lim.max_memory_mib = static_cast<int64_t>(big) * 4;
  ASSERT_TRUE(store_->setTenantLimits("dev", lim).ok());
  ASSERT_TRUE(nodes_[0].signal(SIGTERM).ok());
  ASSERT_TRUE(nodes_[0].waitFor(30s).ok());
  const std::string cache0 = dir_->path() + "/node0-cache/templates";
  {
    templates::TemplateStore ts(cache0, "fake", "k");
    auto s =
        hypervisor::testing::installFakeTemplate(ts, dir_->path() + "/solo-staging", "solo", big);
    ASSERT_TRUE(s.ok()) << s.error().message();
  }
  ASSERT_TRUE(startNode(0)) << logs();
  ASSERT_TRUE(waitUntil([&] {
    auto t = store_->getTemplate("solo", "");
    return t.ok() && t->has_value();
  })) << "node0 did not register solo\n"
      << logs();
  // The replicas list it from the catalogue (they have no files).
  ASSERT_TRUE(waitUntil([&] {
    auto l = client(apiUrl(1), key_).get("/v1/templates");
    return l.ok() && json::serialize(*l).find("\"solo\"") != std::string::npos;
  })) << logs();

  auto [first, op1] = createOf(0, "solo");
  ASSERT_TRUE(waitUntil([&] { return finished(0, op1); })) << logs();
  ASSERT_EQ(opState(0, op1), "done") << opJson(0, op1) << logs();
  ASSERT_EQ(row(first)->node, "node0");
  ASSERT_TRUE(waitUntil([&] { return nodeRows()["node0"].memory_free_mib < big; })) << logs();

  // Copied to the node the next one is placed on, checked, and it runs.
  auto [second, op2] = createOf(1, "solo");
  ASSERT_TRUE(waitUntil([&] { return finished(1, op2); })) << logs();
  ASSERT_EQ(opState(1, op2), "done") << opJson(1, op2) << logs();
  const std::string copied = row(second)->node;
  ASSERT_NE(copied, "node0");
  EXPECT_EQ(echo(0, second, "copied"), "copied\n") << logs();
  const std::string cache1 = dir_->path() + "/" + copied + "-cache/templates";
  for (const char* f : {templates::kRootfsFile, templates::kMemoryFile, templates::kStateFile})
    EXPECT_EQ(sha256File(cache1 + "/solo/v1/" + f).value_or("a"),
              sha256File(cache0 + "/solo/v1/" + f).value_or("b"))
        << f;
  ASSERT_TRUE(waitUntil([&] { return nodeRows()[copied].memory_free_mib < big; })) << logs();

  // Both sources corrupted (one byte each): the third node refuses the copy.
  for (const auto& root : {cache0, cache1}) {
    std::string p = root + "/solo/v1/" + templates::kRootfsFile;
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << p;
    f.seekp(3);
    f.put('#');
  }
  auto [third, op3] = createOf(0, "solo");
  ASSERT_TRUE(waitUntil([&] { return finished(0, op3); })) << logs();
  std::string why = opJson(0, op3);
  EXPECT_EQ(opState(0, op3), "failed") << why;
  EXPECT_NE(why.find("the catalogue's manifest says"), std::string::npos) << why;
  EXPECT_NE(why.find("rootfs.ext4"), std::string::npos) << why;
  const std::string refused = row(third)->node;
  ASSERT_TRUE(refused != "node0" && refused != copied) << refused;
  const std::string cache2 = dir_->path() + "/" + refused + "-cache/templates";
  EXPECT_FALSE(std::filesystem::exists(cache2 + "/solo"));
  for (const auto& e : std::filesystem::directory_iterator(cache2))
    EXPECT_NE(e.path().filename().string().rfind(".staging-", 0), 0u) << e.path();

  // A fork into a template through a replica runs on the sandbox's node,
  // which registers it: the other replica creates from it at once.
  {
    auto [parent, pop] = create(0);
    ASSERT_TRUE(waitUntil([&] { return finished(0, pop); })) << logs();
    ASSERT_EQ(opState(0, pop), "done") << opJson(0, pop);
    auto f = client(apiUrl(1), key_)
                 .post("/v1/sandboxes/" + parent + ":fork", json::object{{"template", "forked"}});
    ASSERT_TRUE(f.ok()) << f.error().message();
    std::string fop = testing::str(f->at("operation"), "id");
    ASSERT_TRUE(waitUntil([&] { return finished(1, fop); })) << logs();
    ASSERT_EQ(opState(0, fop), "done") << opJson(0, fop) << logs();
    auto [fromFork, op5] = createOf(0, "forked");
    ASSERT_TRUE(waitUntil([&] { return finished(0, op5); })) << logs();
    EXPECT_EQ(opState(0, op5), "done") << opJson(0, op5) << logs();
    EXPECT_EQ(echo(1, fromFork, "forked"), "forked\n");
  }
}

}  // namespace
}  // namespace vessel
