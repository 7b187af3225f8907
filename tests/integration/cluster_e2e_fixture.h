// The cluster end-to-end tests' fixture (cluster_e2e_test.cc,
// cluster_envd_e2e_test.cc): one real PostgreSQL, three
// `vesseld --role=node` processes each in its own network namespace (a
// "host" with a veth on a bridge the fixture makes), and two `--role=api`
// replicas. The nodes run the fake hypervisor (its "VMs" are the real
// agent on the host), so the tests are about the cluster, not guest boots.
// Needs root (namespaces, veth, bridge).
#pragma once
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
#include "base/hex.h"
#include "base/sha256.h"
#include "client/client.h"
#include "cluster/catalogue_signature.h"
#include "e2b/envd/connect.h"
#include "e2b/envd/signature.h"
#include "guest_env.h"
#include "http_client.h"
#include "hypervisor/testing/fake_hypervisor.h"
#include "store/store.h"
#include "store/testing/postgres_server.h"
#include "templates/store.h"

namespace vessel::cluster_e2e {

namespace json = boost::json;
using namespace std::chrono_literals;

constexpr int kNodes = 3;
constexpr int kApis = 2;
// The replicas' catalogue signing key (its seed), as the tests know it.
inline const std::string kCatalogueSeed(32, '\x5a');

// Each node its own token (issue 24, item 5); the replicas hold them all.
inline std::string nodeToken(int i) {
  return "cluster-test-token-of-node" + std::to_string(i) + "-0123456789";
}

inline bool sh(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

// Polls `done` (each poll is a store or HTTP read) until it holds or `limit`
// passes; false on timeout. Nothing here is timed: the bound only keeps a
// broken cluster from hanging the test.
inline bool waitUntil(const std::function<bool()>& done, std::chrono::seconds limit = 30s) {
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
    tokens_file_ = dir_->path() + "/node-tokens";
    {
      std::ofstream all(tokens_file_);
      for (int i = 0; i < kNodes; ++i) {
        all << nodeName(i) << " " << nodeToken(i) << "\n";
        std::ofstream(tokenFile(i)) << nodeToken(i) << "\n";
      }
    }
    // The replicas' catalogue signing key; the nodes get its public half.
    {
      auto signer = cluster::CatalogueSigner::fromSeed(kCatalogueSeed);
      ASSERT_TRUE(signer.ok()) << signer.error().message();
      std::ofstream(dir_->path() + "/catalogue-key") << hexEncode(kCatalogueSeed) << "\n";
      ASSERT_EQ(::chmod((dir_->path() + "/catalogue-key").c_str(), 0600), 0);
      std::ofstream(dir_->path() + "/catalogue-public-key") << signer->publicKeyHex() << "\n";
    }
    ASSERT_NO_FATAL_FAILURE(prepare());
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
  std::string tokenFile(int i) const { return dir_->path() + "/node-token-" + std::to_string(i); }
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
            "--state-dir=" + dir_->path() + "/" + state,
            "--cache-dir=" + dir_->path() + "/" + state + "-cache"};
  }
  // Puts template `name` ("solo") on node0 only (node0 stopped, installed,
  // started again), so large (a number only, to the fake) that one sandbox
  // of it fills a node: the next create must go to another node. `*big` is
  // its memory; the tenant may hold four of it.
  void putSoloOnNode0(uint64_t* big, const std::string& name = "solo") {
    uint64_t host_mib = 0;
    {
      std::ifstream in("/proc/meminfo");
      std::string k;
      uint64_t kib = 0;
      while (in >> k >> kib && k != "MemTotal:") in.ignore(256, '\n');
      host_mib = kib / 1024;
    }
    ASSERT_GT(host_mib, 0u);
    *big = host_mib / 2 + 1;
    store::TenantLimits lim;
    lim.max_memory_mib = static_cast<int64_t>(*big) * 4;
    ASSERT_TRUE(store_->setTenantLimits("dev", lim).ok());
    ASSERT_TRUE(nodes_[0].signal(SIGTERM).ok());
    ASSERT_TRUE(nodes_[0].waitFor(std::chrono::seconds(30)).ok());
    {
      templates::TemplateStore ts(dir_->path() + "/node0-cache/templates", "fake", "k");
      auto s = hypervisor::testing::installFakeTemplate(ts, dir_->path() + "/" + name + "-staging",
                                                        name, *big);
      ASSERT_TRUE(s.ok()) << s.error().message();
    }
    ASSERT_TRUE(startNode(0)) << logs();
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
          "--e2b-envd-listen=" + ip(i) + ":49983", "--node-token-file=" + tokenFile(i),
          "--catalogue-public-key-file=" + dir_->path() + "/catalogue-public-key"})
      argv.push_back(a);
    for (auto& a : nodeFlags(i)) argv.push_back(a);
    if (!spawn(argv, dir_->path() + "/node" + std::to_string(i) + ".log", nodes_[i])) return false;
    return waitUntil([&] { return nodeClient(i).get("/readyz").ok(); });
  }
  // Hooks for a fixture of another shape (cluster_tls_e2e_test.cc): what
  // is made before the nodes start, each node's and replica's own flags,
  // and the client a node's readiness is asked with.
  virtual void prepare() {}
  virtual std::vector<std::string> nodeFlags(int) const {
    // The nodes' private "network" (a bridge of namespaces): plain HTTP
    // between replicas and nodes, as on a private network with
    // --allow-plain-http.
    return {"--allow-plain-http"};
  }
  virtual std::vector<std::string> apiFlags(int) const { return {}; }
  virtual client::Client nodeClient(int i) const { return client("http://" + ip(i) + ":8091", ""); }
  bool startApi(int i) {
    api_ports_[i] = testing::freePort();
    e2b_ports_[i] = testing::freePort();
    envd_ports_[i] = testing::freePort();
    std::vector<std::string> argv = {
        VESSELD_PATH, "--role=api", "--store=" + url_,
        "--listen=127.0.0.1:" + std::to_string(api_ports_[i]),
        "--e2b-listen=127.0.0.1:" + std::to_string(e2b_ports_[i]),
        "--e2b-envd-listen=127.0.0.1:" + std::to_string(envd_ports_[i]), "--node-lost-after=4",
        // The envd token key: the replicas', the same file for both.
        "--e2b-token-key-file=" + dir_->path() + "/e2b-token-key",
        // The credential key: likewise the replicas' alone.
        "--credential-key-file=" + dir_->path() + "/credential-key",
        // Every node's token: each node accepts only its own.
        "--node-tokens-file=" + tokens_file_,
        "--catalogue-key-file=" + dir_->path() + "/catalogue-key"};
    for (auto& a : common("api" + std::to_string(i))) argv.push_back(a);
    for (auto& a : apiFlags(i)) argv.push_back(a);
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

  // Signs the stored catalogue entry name@version as the replicas do (what
  // an operator does for a template installed on a node by hand).
  void signAsReplicas(const std::string& name, const std::string& version) {
    auto signer = cluster::CatalogueSigner::fromSeed(kCatalogueSeed);
    ASSERT_TRUE(signer.ok());
    auto row = store_->getTemplate(name, version);
    ASSERT_TRUE(row.ok() && row->has_value()) << name << "@" << version;
    auto sig = signer->sign(**row);
    ASSERT_TRUE(sig.ok());
    ASSERT_TRUE(store_->setMeta(cluster::templateSignatureKey(name, version), *sig).ok());
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

  std::string sfx_, net_, bridge_, url_, tokens_file_, key_;
  std::unique_ptr<testing::ScratchDir> dir_;
  std::unique_ptr<store::testing::PostgresServer> pg_;
  std::unique_ptr<store::Store> store_;
  ChildProcess nodes_[kNodes];
  ChildProcess apis_[kApis];
  uint16_t api_ports_[kApis] = {};
  uint16_t e2b_ports_[kApis] = {};
  uint16_t envd_ports_[kApis] = {};
};

}  // namespace vessel::cluster_e2e
