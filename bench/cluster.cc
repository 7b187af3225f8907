// bench/cluster (issue 15): creates per second and create latency through
// one `vesseld --role=api` replica with 1, 2 and 3 `--role=node` processes
// on this host, against a private PostgreSQL 15, in one run. The nodes run
// the fake hypervisor (their "VMs" are the agent on the host), so this
// measures the cluster's path (placement, node API, store, operation
// events), not guest boots; bench/create measures those. Needs root (the
// fake hypervisor's namespaces). Latency: POST /v1/sandboxes until its
// operation's `done` event arrives, one at a time; throughput: 8 clients.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/child_process.h"
#include "base/fd.h"
#include "bench_util.h"
#include "client/client.h"
#include "store/testing/postgres_server.h"

namespace vessel::bench {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

uint16_t freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

client::Client api(const std::string& url, const std::string& key) {
  client::ClientOptions o;
  o.url = url;
  o.token = key;
  o.timeout = 30s;
  return client::Client(o);
}

bool waitReady(const std::string& url) {
  for (int i = 0; i < 300; ++i) {
    if (api(url, "").get("/readyz").ok()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

// One create, to its operation's end: milliseconds, or -1.
double createOne(const std::string& url, const std::string& key, std::string* id) {
  auto c = api(url, key);
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.post("/v1/sandboxes", json::object{});
  if (!r.ok()) return -1;
  *id = std::string(r->at("sandbox").at("id").as_string());
  std::string op(r->at("operation").at("id").as_string());
  auto events = c.stream("GET", "/v1/operations/" + op + "/events");
  if (!events.ok()) return -1;
  for (;;) {
    auto e = events->next();
    if (!e.ok() || !e->has_value()) return -1;
    if ((*e)->type == "operation.done") return msSince(t0);
    if ((*e)->type == "operation.failed") return -1;
  }
}

struct Row {
  int nodes = 0;
  Stats latency;
  double creates_per_s = 0;
};

}  // namespace

// Long because a benchmark reads best as its script: set-up, each
// measured phase, the table, in order.
int run() {
  const std::string vesseld = VESSELD_PATH, agent = VESSEL_AGENT_BINARY;
  const std::string kernel = env("VESSEL_KERNEL"), image = env("VESSEL_MINIMAL_IMAGE");
  char tmpl[] = "/tmp/vessel-bench-cluster-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;
  const std::string token_file = dir + "/token";
  std::ofstream(token_file) << "bench-cluster-node-token-0123456789\n";
  auto pg = store::testing::PostgresServer::start();
  if (!pg.ok()) {
    std::fprintf(stderr, "postgres: %s\n", pg.error().message().c_str());
    return 1;
  }
  std::vector<Row> rows;
  for (int n = 1; n <= 3; ++n) {
    auto url = (*pg)->createDatabase("bench" + std::to_string(n));
    if (!url.ok()) return 1;
    std::string run_dir = dir + "/n" + std::to_string(n);
    std::vector<ChildProcess> procs;
    auto spawn = [&](std::vector<std::string> argv, const std::string& log) {
      auto fd = Fd::open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
      SpawnOptions o;
      o.argv = std::move(argv);
      if (fd.ok()) o.fds = {{fd->get(), 1}, {fd->get(), 2}};
      o.die_with_parent = true;
      auto p = ChildProcess::spawn(o);
      if (p.ok()) procs.push_back(std::move(*p));
      return p.ok();
    };
    auto common = [&](const std::string& state) {
      return std::vector<std::string>{vesseld,
                                      "--store=" + *url,
                                      "--hypervisor=fake",
                                      "--fake-agent=" + agent,
                                      "--no-jail",
                                      "--no-egress",
                                      "--warm-pool=none",
                                      "--e2b-listen",
                                      "",
                                      "--e2b-envd-listen",
                                      "",
                                      "--kernel=" + kernel,
                                      "--minimal-image=" + image,
                                      "--node-token-file=" + token_file,
                                      "--state-dir=" + run_dir + "/" + state,
                                      "--cache-dir=" + run_dir + "/" + state + "-c",
                                      "--tenant-max-sandboxes=10000",
                                      "--tenant-max-memory=10000000",
                                      "--tenant-max-vcpus=100000",
                                      "--tenant-max-disk=100000000"};
    };
    bool ok = true;
    for (int i = 0; i < n && ok; ++i) {
      uint16_t np = freePort(), dp = freePort();
      auto argv = common("node" + std::to_string(i));
      for (std::string a : {std::string("--role=node"), "--node-name=node" + std::to_string(i),
                            "--node-listen=127.0.0.1:" + std::to_string(np),
                            "--data-listen=127.0.0.1:" + std::to_string(dp)})
        argv.push_back(a);
      ok = spawn(argv, run_dir + "-node" + std::to_string(i) + ".log") &&
           waitReady("http://127.0.0.1:" + std::to_string(np));
    }
    uint16_t ap = freePort();
    std::string api_url = "http://127.0.0.1:" + std::to_string(ap);
    auto argv = common("api");
    argv.push_back("--role=api");
    argv.push_back("--listen=127.0.0.1:" + std::to_string(ap));
    ok = ok && spawn(argv, run_dir + "-api.log") && waitReady(api_url);
    std::string key;
    for (int i = 0; ok && key.empty() && i < 100; ++i) {
      std::ifstream in(run_dir + "/api/dev-api-key");
      std::getline(in, key);
      if (key.empty()) std::this_thread::sleep_for(50ms);
    }
    if (!ok || key.empty()) {
      std::fprintf(stderr, "cluster with %d node(s) did not start; logs in %s\n", n, dir.c_str());
      return 1;
    }
    Row row;
    row.nodes = n;
    std::vector<double> lat;
    std::vector<std::string> ids;
    for (int i = 0; i < 30; ++i) {
      std::string id;
      double ms = createOne(api_url, key, &id);
      if (ms >= 0) lat.push_back(ms);
      if (!id.empty()) ids.push_back(id);
    }
    row.latency = stats(lat);
    constexpr int kClients = 8, kEach = 10;
    std::atomic<int> done{0};
    std::vector<std::thread> clients;
    auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < kClients; ++c)
      clients.emplace_back([&] {
        for (int i = 0; i < kEach; ++i) {
          std::string id;
          if (createOne(api_url, key, &id) >= 0) ++done;
        }
      });
    for (auto& t : clients) t.join();
    row.creates_per_s = done.load() / (msSince(t0) / 1000.0);
    for (auto& p : procs) p.terminate(5s);
    rows.push_back(row);
  }
  std::printf("\n| nodes | create p50 ms | create p99 ms | creates/s (8 clients) |\n");
  std::printf("|---|---|---|---|\n");
  json::array out;
  for (const auto& r : rows) {
    std::printf("| %d | %.1f | %.1f | %.1f |\n", r.nodes, r.latency.p50, r.latency.p99,
                r.creates_per_s);
    out.push_back(json::object{{"nodes", r.nodes},
                               {"create_latency_ms", toJson(r.latency)},
                               {"creates_per_s", r.creates_per_s}});
  }
  writeResults("cluster", json::object{{"hypervisor", "fake"}, {"runs", out}});
  pg->reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace vessel::bench

int main() { return vessel::bench::run(); }
