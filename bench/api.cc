// bench/api: the public API under load, through a real vesseld over HTTP,
// as a client sees it. Per create: POST /v1/sandboxes until its operation is
// done (followed through the operation's SSE stream) = ready; then a session
// and POST /v1/exec `true` on the data plane until its exit event = first
// exec. At concurrency 1, 8 and 32, with list/get latency measured while
// those creates run, for vesseld without a warm pool and with its default
// one (--warm-pool minimal=2), side by side in one run. Each sandbox is
// deleted afterwards. With the default pool first: creates back to back
// and in bursts beside cold boots and a bubblewrap container (runLoad;
// VESSEL_BENCH_LOAD_ONLY=1 runs only that). Last, what the sandbox log
// costs (issue 28): creates back to back to their first exec with the
// command log on and off (--no-command-log), each in its own vesseld,
// alternating (runLogCost; VESSEL_BENCH_LOG_ONLY=1 runs only that).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "bench_util.h"
#include "bwrap.h"
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

// `n` creates at once through the API (`body`), each timed from its POST to
// its first `true` exiting; the sandboxes are deleted afterwards.
// Where a create's time went as the client saw it, per create (ms): the
// POST until its 202 (admission and store writes), the 202 until the
// operation is done (the node's create), a data-plane session, the first
// command.
using Segments = std::map<std::string, std::vector<double>>;

std::vector<double> createsToFirstExec(testing::Vesseld& d, int n, const std::string& body,
                                       bool keep, std::vector<std::string>& made,
                                       Segments* segments = nullptr) {
  std::mutex mu;
  std::vector<double> out;
  std::vector<std::thread> workers;
  for (int i = 0; i < n; ++i)
    workers.emplace_back([&] {
      auto t = Clock::now();
      auto c = d.call("POST", "/v1/sandboxes", body);
      if (c.status != 202) {
        std::fprintf(stderr, "create: %d %s\n", c.status, c.body.c_str());
        return;
      }
      double accept = msSince(t);
      std::string id = str(c.js().at("sandbox"), "id");
      std::string st = d.finish(str(c.js().at("operation"), "id"));
      double running = msSince(t), session = 0;
      double first = -1;
      if (st == "done") {
        std::string tok = d.session(id);
        session = msSince(t);
        auto x = tok.empty() ? testing::Vesseld::ExecOutput{} : d.exec(tok, R"({"cmd":["true"]})");
        if (x.exit_code == 0) first = msSince(t);
      }
      std::lock_guard<std::mutex> g(mu);
      made.push_back(id);
      if (first >= 0) out.push_back(first);
      if (first >= 0 && segments) {
        (*segments)["post_to_202"].push_back(accept);
        (*segments)["202_to_running"].push_back(running - accept);
        (*segments)["session"].push_back(session - running);
        (*segments)["first_exec"].push_back(first - session);
      }
    });
  for (auto& w : workers) w.join();
  if (!keep) {
    for (auto& id : made) {
      auto del = d.call("DELETE", "/v1/sandboxes/" + id);
      if (del.status == 202) d.finish(str(del.js().at("operation"), "id"));
    }
    made.clear();
  }
  return out;
}

// Issue 16: as users create (the default pool): 20 back to back, each
// sandbox left running until the end; bursts of 8 and 32 after 10 s idle;
// beside cold boots and a bubblewrap container in the same run.
void runLoad(testing::Vesseld& d, boost::json::array& rows) {
  BwrapRoot box(std::getenv("VESSEL_DEBIAN_IMAGE") ? std::getenv("VESSEL_DEBIAN_IMAGE") : "");
  std::printf(
      "\n| scenario (API, create to first exec) | n | p50 ms | p99 ms | max ms |\n"
      "|---|---|---|---|---|\n");
  auto row = [&](const std::string& name, const std::vector<double>& v) {
    auto s = stats(v);
    std::printf("| %s | %zu | %.0f | %.0f | %.0f |\n", name.c_str(), s.n, s.p50, s.p99, s.max);
    std::fflush(stdout);
    auto j = toJson(s);
    j["scenario"] = name;
    rows.push_back(std::move(j));
    return s;
  };
  std::vector<std::string> made;
  std::vector<double> single;
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(3));  // the pool refilled: an idle node
    for (double v : createsToFirstExec(d, 1, "{}", false, made)) single.push_back(v);
  }
  auto idle1 = row("warm pool, idle node, 1 create", single);
  // VESSEL_BENCH_B2B_ONLY: the back-to-back loop and its breakdown only
  // (for comparing two builds side by side).
  bool b2b_only = std::getenv("VESSEL_BENCH_B2B_ONLY") != nullptr;
  std::vector<double> cold;
  for (int i = 0; i < (b2b_only ? 0 : 3); ++i)
    for (double v : createsToFirstExec(d, 1, R"({"cold":true})", false, made)) cold.push_back(v);
  if (!b2b_only) row("cold boot, 1 create", cold);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  std::vector<double> b2b;
  Segments seg;
  for (int i = 0; i < 20; ++i)
    for (double v : createsToFirstExec(d, 1, "{}", true, made, &seg)) b2b.push_back(v);
  auto b2b_s = row("back to back x20", b2b);
  (void)createsToFirstExec(d, 0, "{}", false, made);  // deletes the 20
  if (box.ok() && !b2b_only) row("bwrap, back to back x20", box.loop(20));
  double worst8 = 0;
  for (int n : {8, 32}) {
    if (b2b_only) break;
    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::string name = "burst of " + std::to_string(n) + " after 10 s idle";
    auto s = row(name, createsToFirstExec(d, n, "{}", false, made));
    if (n == 8) worst8 = s.max;
    if (box.ok()) row("bwrap, " + name, box.burst(n));
  }
  auto m = d.call("GET", "/metrics", "", "");
  for (const char* k : {"vessel_warm_pool_hits_total{", "vessel_warm_pool_misses_total{",
                        "vessel_warm_pool_target_vms{", "vessel_warm_pool_vm_pss_mib{"}) {
    auto at = m.body.find(k);
    if (at != std::string::npos)
      std::printf("%s\n", m.body.substr(at, m.body.find('\n', at) - at).c_str());
  }
  std::printf(
      "back-to-back p50 / idle warm-pool p50: %.1fx (target <= 3x); burst of 8: slowest "
      "first command %.0f ms (target <= 2000)\n\n",
      idle1.p50 > 0 ? b2b_s.p50 / idle1.p50 : 0, worst8);
  std::printf(
      "back to back x20, as the client saw it:\n\n| segment | p50 ms | p99 ms |\n|---|---|---|\n");
  boost::json::object segs;
  for (const char* name : {"post_to_202", "202_to_running", "session", "first_exec"}) {
    auto s = stats(seg[name]);
    std::printf("| %s | %.1f | %.1f |\n", name, s.p50, s.p99);
    segs[name] = toJson(s);
  }
  std::printf("\n");
  boost::json::object r{{"scenario", "back to back x20 segments"}, {"segments", std::move(segs)}};
  rows.push_back(std::move(r));
}

// One vesseld with `pool` (--warm-pool), every concurrency; rows appended.
bool runConfig(const std::string& pool, const std::string& root, boost::json::array& rounds,
               boost::json::array& load) {
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
  if (pool != "none") runLoad(d, load);
  if (std::getenv("VESSEL_BENCH_LOAD_ONLY")) {
    d.stop();
    return true;
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

// What logging costs: back-to-back creates to a first exec, with vesseld's
// command log (each command, file operation and port connection in its
// sandbox's log) on and off, in rounds that alternate between the two so
// that drift of the host counts against both alike.
bool runLogCost(const std::string& base, boost::json::array& rows) {
  constexpr int kRounds = 4, kPerRound = 5;
  std::map<bool, std::vector<double>> first;
  std::map<bool, std::vector<double>> exec_only;
  for (int round = 0; round < kRounds; ++round) {
    for (bool on : {true, false}) {
      std::string root = base + "-log-" + (on ? "on" : "off");
      std::filesystem::create_directories(root);
      testing::VesseldOptions o{
          VESSELD_PATH,
          env("VESSEL_KERNEL"),
          env("VESSEL_MINIMAL_IMAGE"),
          root,
          {"--tenant-max-sandboxes", "1000", "--tenant-max-memory", "1048576", "--stop-vms-on-exit",
           "--warm-pool", "minimal=2", on ? "--command-log" : "--no-command-log"}};
      testing::Vesseld d(o);
      if (!d.start()) {
        std::fprintf(stderr, "vesseld did not start:\n%s\n", d.log().c_str());
        return false;
      }
      for (int i = 0; i < 600; ++i) {  // the pool full, as on a node that has been up
        auto m = d.call("GET", "/metrics", "", "");
        if (m.body.find("vessel_warm_pool_vms{template=\"minimal\"} 2") != std::string::npos) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      std::vector<std::string> made;
      Segments seg;
      for (int i = 0; i < kPerRound; ++i)
        for (double v : createsToFirstExec(d, 1, "{}", true, made, &seg)) first[on].push_back(v);
      for (double v : seg["first_exec"]) exec_only[on].push_back(v);
      (void)createsToFirstExec(d, 0, "{}", false, made);  // deletes them
      d.stop();
      std::error_code ec;
      std::filesystem::remove_all(root, ec);
    }
  }
  std::printf(
      "\nwhat logging costs (back to back, create to first exec, %d rounds of %d, alternating):"
      "\n\n| command log | n | p50 ms | p99 ms | max ms | first exec p50 ms |\n"
      "|---|---|---|---|---|---|\n",
      kRounds, kPerRound);
  for (bool on : {true, false}) {
    auto s = stats(first[on]);
    auto x = stats(exec_only[on]);
    std::printf("| %s | %zu | %.0f | %.0f | %.0f | %.1f |\n", on ? "on" : "off", s.n, s.p50, s.p99,
                s.max, x.p50);
    auto j = toJson(s);
    j["command_log"] = on;
    j["first_exec_ms"] = toJson(x);
    rows.push_back(std::move(j));
  }
  double on50 = stats(first[true]).p50, off50 = stats(first[false]).p50;
  std::printf("command log on / off, p50: %.3fx\n\n", off50 > 0 ? on50 / off50 : 0);
  std::fflush(stdout);
  return true;
}

int run() {
  std::string base =
      std::filesystem::temp_directory_path() / ("vessel-bench-api-" + std::to_string(::getpid()));
  boost::json::array rounds, load;
  int rc = 0;
  boost::json::array log_cost;
  if (std::getenv("VESSEL_BENCH_LOG_ONLY")) {
    rc = runLogCost(base, log_cost) ? 0 : 1;
    writeResults("api-log-cost", {{"log_cost", log_cost}});
    return rc;
  }
  std::printf("%-14s %-5s %7s %9s %9s %9s %9s %8s %8s %8s %8s %6s\n", "warm_pool", "conc", "wall_s",
              "ready_p50", "ready_p99", "exec_p50", "exec_p99", "list_p50", "list_p99", "get_p50",
              "get_p99", "failed");
  std::vector<const char*> pools = {"none", "minimal=2"};
  if (std::getenv("VESSEL_BENCH_LOAD_ONLY")) pools = {"minimal=2"};
  for (const char* pool : pools) {
    std::string root = base + "-" + (std::string(pool) == "none" ? "nopool" : "pool");
    std::filesystem::create_directories(root);
    if (!runConfig(pool, root, rounds, load)) rc = 1;
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  std::printf(
      "(ms; ready = create until its operation is done; exec = create until the exit of "
      "a first `true` through a session on the data plane)\n");
  if (!std::getenv("VESSEL_BENCH_LOAD_ONLY") && !runLogCost(base, log_cost)) rc = 1;
  writeResults(std::getenv("VESSEL_BENCH_LOAD_ONLY") ? "api-load" : "api",
               {{"rounds", rounds}, {"load", load}, {"log_cost", log_cost}});
  return rc;
}

}  // namespace
}  // namespace vessel::bench

int main() { return vessel::bench::run(); }
