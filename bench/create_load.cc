#include "create_load.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <map>

#include "base/run_blocking.h"
#include "bench_util.h"
#include "bwrap.h"
#include "node/runtime.h"

namespace vessel::bench {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct Sample {
  double ms = 0;
  bool hit = false;
  std::vector<std::pair<std::string, double>> phases;  // runtime's, then "first_exec"
};

// `n` creates at once, each timed from its start to its first command's
// exit; the sandboxes go into `live`.
std::vector<Sample> burst(LoadEnv& e, node::Runtime& rt, int n, bool cold,
                          std::vector<std::shared_ptr<node::Sandbox>>& live) {
  std::vector<Sample> out;
  int done = 0;
  for (int i = 0; i < n; ++i)
    asio::co_spawn(
        e.io,
        [&, cold]() -> asio::awaitable<void> {
          auto t0 = Clock::now();
          node::CreateOptions o;
          o.cold = cold;
          auto sb = co_await rt.create(e.tmpl, std::move(o));
          if (!sb.ok()) {
            std::fprintf(stderr, "create: %s\n", sb.error().message().c_str());
            ++done;
            co_return;
          }
          auto t1 = Clock::now();
          node::ExecSpec ex;
          ex.argv = {"true"};
          auto r = co_await (*sb)->agent()->run(ex);
          if (r.ok() && r->exit.exited && r->exit.code == 0) {
            Sample s;
            s.ms = msSince(t0);
            s.phases = (*sb)->phases();
            for (auto& [name, v] : s.phases) s.hit = s.hit || name == "from_pool";
            s.phases.emplace_back("first_exec", msSince(t1));
            out.push_back(std::move(s));
          } else {
            std::fprintf(stderr, "first exec failed\n");
          }
          live.push_back(*sb);
          ++done;
        },
        asio::detached);
  e.io.restart();
  while (done < n) e.io.run_one_for(std::chrono::milliseconds(20));
  return out;
}

void destroyAll(LoadEnv& e, node::Runtime& rt, std::vector<std::shared_ptr<node::Sandbox>>& l) {
  for (auto& sb : l) (void)runBlocking(e.io, rt.destroy(*sb));
  l.clear();
}

// The node left alone (pool refills run meanwhile).
void idle(LoadEnv& e, std::chrono::seconds d) {
  e.io.restart();
  e.io.run_for(d);
  e.io.restart();
}

std::vector<double> ms(const std::vector<Sample>& v) {
  std::vector<double> out;
  for (auto& s : v) out.push_back(s.ms);
  return out;
}

}  // namespace

int runLoad(LoadEnv& e, boost::json::object& out) {
  node::RuntimeOptions o;
  o.root = e.root + "/rt-load";
  o.kernel = e.kernel;
  node::Runtime rt(e.io, e.hv, e.store, o);
  // `make up`: --warm-pool minimal=2 with the default --warm-pool-budget.
  rt.setPoolSize(e.tmpl, 2);
  rt.setPoolBudget(e.tmpl, 1024);
  std::vector<std::shared_ptr<node::Sandbox>> live;
  BwrapRoot box(e.debian_image);

  boost::json::array rows;
  std::printf(
      "\n| scenario | n | p50 ms | p99 ms | max ms | from pool |\n|---|---|---|---|---|---|\n");
  auto row = [&](const char* name, const std::vector<double>& v, int hits) {
    auto s = stats(v);
    std::printf("| %s | %zu | %.0f | %.0f | %.0f | %s |\n", name, s.n, s.p50, s.p99, s.max,
                hits < 0 ? "-" : std::to_string(hits).c_str());
    std::fflush(stdout);
    auto j = toJson(s);
    j["scenario"] = name;
    if (hits >= 0) j["from_pool"] = hits;
    rows.push_back(std::move(j));
    return s;
  };
  auto hits = [](const std::vector<Sample>& v) {
    int n = 0;
    for (auto& s : v) n += s.hit;
    return n;
  };

  // Idle node, pool full: one create at a time, the pool refilled between.
  std::vector<Sample> single;
  for (int i = 0; i < 5; ++i) {
    (void)runBlocking(e.io, rt.fillPool(e.tmpl));
    auto b = burst(e, rt, 1, false, live);
    single.insert(single.end(), b.begin(), b.end());
    destroyAll(e, rt, live);
  }
  auto idle1 = row("warm pool, idle node, 1 create", ms(single), hits(single));
  std::vector<Sample> cold;
  for (int i = 0; i < 3; ++i) {
    auto b = burst(e, rt, 1, true, live);
    cold.insert(cold.end(), b.begin(), b.end());
    destroyAll(e, rt, live);
  }
  row("cold boot, 1 create", ms(cold), -1);

  // 20 back to back, each sandbox left running (as a loop in a user's
  // script does).
  (void)runBlocking(e.io, rt.fillPool(e.tmpl));
  idle(e, std::chrono::seconds(2));
  std::vector<Sample> b2b;
  for (int i = 0; i < 20; ++i) {
    auto b = burst(e, rt, 1, false, live);
    b2b.insert(b2b.end(), b.begin(), b.end());
  }
  auto b2b_s = row("back to back x20", ms(b2b), hits(b2b));
  destroyAll(e, rt, live);
  if (box.ok()) row("bwrap, back to back x20", box.loop(20), -1);

  boost::json::object bursts;
  double worst8 = 0;
  for (int n : {8, 32}) {
    idle(e, std::chrono::seconds(10));
    auto b = burst(e, rt, n, false, live);
    std::string name = "burst of " + std::to_string(n) + " after 10 s idle";
    auto s = row(name.c_str(), ms(b), hits(b));
    if (n == 8) worst8 = s.max;
    destroyAll(e, rt, live);
    if (box.ok()) row(("bwrap, " + name).c_str(), box.burst(n), -1);
  }
  auto st = rt.poolStats(e.tmpl);
  std::printf(
      "\npool after the run: %zu pooled, target %zu, %llu hits, %llu misses, %llu MiB PSS per "
      "pooled VM\n",
      st.pooled, st.target, static_cast<unsigned long long>(st.hits),
      static_cast<unsigned long long>(st.misses), static_cast<unsigned long long>(st.vm_cost_mib));
  double ratio = idle1.p50 > 0 ? b2b_s.p50 / idle1.p50 : 0;
  std::printf(
      "back-to-back p50 / idle warm-pool p50: %.1fx (target <= 3x); burst of 8: slowest "
      "first command %.0f ms (target <= 2000)\n",
      ratio, worst8);

  // Where a back-to-back create spends its time, per phase (p50).
  std::map<std::string, std::vector<double>> phases;
  std::vector<std::string> order;
  for (auto& s : b2b)
    for (auto& [name, v] : s.phases) {
      if (!phases.count(name)) order.push_back(name);
      phases[name].push_back(v);
    }
  std::printf(
      "\nback-to-back phases (creates that had them):\n\n| phase | n | p50 ms | p99 ms |\n"
      "|---|---|---|---|\n");
  boost::json::object ph;
  for (auto& name : order) {
    auto s = stats(phases[name]);
    std::printf("| %s | %zu | %.1f | %.1f |\n", name.c_str(), s.n, s.p50, s.p99);
    ph[name] = toJson(s);
  }
  runBlocking(e.io, [&]() -> asio::awaitable<int> {
    co_await rt.drainPools();
    co_return 0;
  }());
  out["load"] = std::move(rows);
  out["load_b2b_over_idle_p50"] = ratio;
  out["load_burst8_max_ms"] = worst8;
  out["load_b2b_phases"] = std::move(ph);
  return 0;
}

}  // namespace vessel::bench
