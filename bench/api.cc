// bench/api: the public API under load, through a real vesseld over HTTP,
// as a client sees it. Per create: POST /v1/sandboxes until its operation is
// done (followed through the operation's SSE stream) = ready; then a session
// and POST /v1/exec `true` on the data plane until its exit event = first
// exec. At concurrency 1, 8 and 32, with list/get latency measured while
// those creates run, for vesseld without a warm pool and with its default
// one (--warm-pool minimal=2), side by side in one run. Each sandbox is
// deleted afterwards.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "bench_util.h"
#include "vesseld_harness.h"

namespace vessel::bench {
namespace {

using Clock = std::chrono::steady_clock;
using testing::str;

struct Round {
  int concurrency = 0;
  std::vector<double> ready_ms, exec_ms, list_ms, get_ms;
  int failed = 0;
  double wall_s = 0;
};

Round runRound(testing::Vesseld& d, int concurrency) {
  Round r;
  r.concurrency = concurrency;
  std::mutex mu;
  std::vector<std::string> made;
  std::atomic<bool> done{false};
  // Readers: list and get, back to back, while the creates run.
  std::thread reader([&] {
    while (!done) {
      auto t = Clock::now();
      auto l = d.call("GET", "/v1/sandboxes?page_size=100");
      double lm = msSince(t);
      std::string id;
      auto body = l.js();  // named: a range-for over a temporary's member dangles
      if (l.status == 200)
        for (auto& s : body.at("sandboxes").as_array()) id = str(s, "id");
      double gm = -1;
      if (!id.empty()) {
        t = Clock::now();
        if (d.call("GET", "/v1/sandboxes/" + id).status == 200) gm = msSince(t);
      }
      std::lock_guard<std::mutex> g(mu);
      if (l.status == 200) r.list_ms.push_back(lm);
      if (gm >= 0) r.get_ms.push_back(gm);
    }
  });
  auto wall = Clock::now();
  std::vector<std::thread> workers;
  for (int i = 0; i < concurrency; ++i)
    workers.emplace_back([&] {
      auto t = Clock::now();
      auto c = d.call("POST", "/v1/sandboxes", "{}");
      if (c.status != 202) {
        std::lock_guard<std::mutex> g(mu);
        ++r.failed;
        std::fprintf(stderr, "create: %d %s\n", c.status, c.body.c_str());
        return;
      }
      std::string id = str(c.js().at("sandbox"), "id");
      std::string st = d.finish(str(c.js().at("operation"), "id"));
      double ready = msSince(t);
      double first = -1;
      if (st == "done") {
        std::string tok = d.session(id);
        auto x = tok.empty() ? testing::Vesseld::ExecOutput{} : d.exec(tok, R"({"cmd":["true"]})");
        if (x.exit_code == 0) first = msSince(t);
      }
      std::lock_guard<std::mutex> g(mu);
      made.push_back(id);
      if (st == "done" && first >= 0) {
        r.ready_ms.push_back(ready);
        r.exec_ms.push_back(first);
      } else {
        ++r.failed;
      }
    });
  for (auto& w : workers) w.join();
  r.wall_s = msSince(wall) / 1000;
  done = true;
  reader.join();
  for (auto& id : made) {
    auto del = d.call("DELETE", "/v1/sandboxes/" + id);
    if (del.status == 202) d.finish(str(del.js().at("operation"), "id"));
  }
  return r;
}

// One vesseld with `pool` (--warm-pool), every concurrency; rows appended.
bool runConfig(const std::string& pool, const std::string& root, boost::json::array& rounds) {
  testing::VesseldOptions o{VESSELD_PATH,
                            env("VESSEL_KERNEL"),
                            env("VESSEL_MINIMAL_IMAGE"),
                            root,
                            {"--tenant-max-sandboxes", "1000", "--tenant-max-memory", "1048576",
                             "--stop-vms-on-exit", "--warm-pool", pool}};
  testing::Vesseld d(o);
  if (!d.start()) {
    std::fprintf(stderr, "vesseld did not start:\n%s\n", d.log().c_str());
    return false;
  }
  // Let the pool fill before the first round, as on a node that has been up.
  for (int i = 0; i < 600; ++i) {
    auto m = d.call("GET", "/metrics", "", "");
    if (pool == "none" ||
        m.body.find("vessel_warm_pool_vms{template=\"minimal\"} 2") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int c : {1, 8, 32}) {
    Round r = runRound(d, c);
    Stats ready = stats(r.ready_ms), ex = stats(r.exec_ms), list = stats(r.list_ms),
          get = stats(r.get_ms);
    std::printf("%-14s %-5d %7.1f %9.0f %9.0f %9.0f %9.0f %8.2f %8.2f %8.2f %8.2f %6d\n",
                pool.c_str(), c, r.wall_s, ready.p50, ready.p99, ex.p50, ex.p99, list.p50, list.p99,
                get.p50, get.p99, r.failed);
    std::fflush(stdout);
    rounds.push_back({{"warm_pool", pool},
                      {"concurrency", c},
                      {"wall_s", r.wall_s},
                      {"creates_per_s", r.wall_s > 0 ? r.ready_ms.size() / r.wall_s : 0},
                      {"create_to_ready_ms", toJson(ready)},
                      {"create_to_first_exec_ms", toJson(ex)},
                      {"list_ms", toJson(list)},
                      {"get_ms", toJson(get)},
                      {"failed", r.failed}});
  }
  d.stop();
  return true;
}

int run() {
  std::string base =
      std::filesystem::temp_directory_path() / ("vessel-bench-api-" + std::to_string(::getpid()));
  boost::json::array rounds;
  std::printf("%-14s %-5s %7s %9s %9s %9s %9s %8s %8s %8s %8s %6s\n", "warm_pool", "conc", "wall_s",
              "ready_p50", "ready_p99", "exec_p50", "exec_p99", "list_p50", "list_p99", "get_p50",
              "get_p99", "failed");
  int rc = 0;
  for (const char* pool : {"none", "minimal=2"}) {
    std::string root = base + "-" + (std::string(pool) == "none" ? "nopool" : "pool");
    std::filesystem::create_directories(root);
    if (!runConfig(pool, root, rounds)) rc = 1;
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  std::printf(
      "(ms; ready = create until its operation is done; exec = create until the exit of "
      "a first `true` through a session on the data plane)\n");
  writeResults("api", {{"rounds", rounds}});
  return rc;
}

}  // namespace
}  // namespace vessel::bench

int main() { return vessel::bench::run(); }
