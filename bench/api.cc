// bench/api: the public API under load, through a real vesseld over HTTP.
// Create-to-ready latency (POST /v1/sandboxes until its operation is done,
// followed through the operation's SSE stream) at concurrency 1, 8 and 32,
// and list/get latency while those creates run. Each sandbox is deleted
// afterwards. The first exec is not measured yet: it needs the data plane
// (sessions, POST /v1/exec), which is not in this build; node-level exec
// cannot reach a guest whose agent channel vesseld holds.
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

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Round {
  int concurrency = 0;
  std::vector<double> ready_ms, list_ms, get_ms;
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
      double ms = msSince(t);
      std::lock_guard<std::mutex> g(mu);
      made.push_back(id);
      if (st == "done")
        r.ready_ms.push_back(ms);
      else
        ++r.failed;
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

int run() {
  std::string root =
      std::filesystem::temp_directory_path() / ("vessel-bench-api-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root);
  testing::VesseldOptions o{
      VESSELD_PATH,
      env("VESSEL_KERNEL"),
      env("VESSEL_MINIMAL_IMAGE"),
      root,
      {"--tenant-max-sandboxes", "1000", "--tenant-max-memory", "1048576", "--stop-vms-on-exit"}};
  int rc = 0;
  {
    testing::Vesseld d(o);
    if (!d.start()) {
      std::fprintf(stderr, "vesseld did not start:\n%s\n", d.log().c_str());
      rc = 1;
    } else {
      boost::json::array rounds;
      std::printf("%-6s %8s %10s %10s %10s %10s %10s %10s %7s\n", "conc", "wall_s", "ready_p50",
                  "ready_p99", "list_p50", "list_p99", "get_p50", "get_p99", "failed");
      for (int c : {1, 8, 32}) {
        Round r = runRound(d, c);
        Stats ready = stats(r.ready_ms), list = stats(r.list_ms), get = stats(r.get_ms);
        std::printf("%-6d %8.1f %10.1f %10.1f %10.2f %10.2f %10.2f %10.2f %7d\n", c, r.wall_s,
                    ready.p50, ready.p99, list.p50, list.p99, get.p50, get.p99, r.failed);
        rounds.push_back({{"concurrency", c},
                          {"wall_s", r.wall_s},
                          {"create_to_ready_ms", toJson(ready)},
                          {"list_ms", toJson(list)},
                          {"get_ms", toJson(get)},
                          {"failed", r.failed}});
      }
      std::printf("(latencies in ms; first exec not measured: no data plane in this build)\n");
      writeResults("api", {{"rounds", rounds},
                           {"first_exec", "not measured: the data plane is not in this build"}});
      d.stop();
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  return rc;
}

}  // namespace
}  // namespace vessel::bench

int main() { return vessel::bench::run(); }
