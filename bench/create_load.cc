#include "create_load.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <fstream>
#include <map>
#include <sstream>

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
          agentclient::ExecSpec ex;
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

// utime + stime of a process, in clock ticks.
uint64_t cpuTicks(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  auto r = line.rfind(')');
  if (r == std::string::npos) return 0;
  std::istringstream in(line.substr(r + 2));
  std::string field;
  uint64_t ut = 0, st = 0;
  // Fields 3.. after the command; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) ut = std::stoull(field);
    if (i == 15) st = std::stoull(field);
  }
  return ut + st;
}

// PSS of a process, and the part in TCG's code buffer (its one anonymous
// rwx mapping), KiB.
std::pair<uint64_t, uint64_t> pssAndTcg(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps");
  std::string line;
  uint64_t all = 0, tcg = 0;
  bool in_tcg = false;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    if (std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < line.find(' ')) {
      std::istringstream h(line);
      std::string range, perms, off, dev, inode, path;
      h >> range >> perms >> off >> dev >> inode >> path;
      in_tcg = path.empty() && perms == "rwxp";
      continue;
    }
    if (line.rfind("Pss:", 0) == 0) {
      uint64_t v = std::stoull(line.substr(4));
      all += v;
      if (in_tcg) tcg += v;
    }
  }
  return {all, tcg};
}

std::vector<double> ms(const std::vector<Sample>& v) {
  std::vector<double> out;
  for (auto& s : v) out.push_back(s.ms);
  return out;
}

}  // namespace

// Long because a benchmark reads best as its script: each load shape
// measured in turn beside its baseline, then the table.
int runLoad(LoadEnv& e, boost::json::object& out, bool b2b_only) {
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
  for (int i = 0; i < (b2b_only ? 0 : 3); ++i) {
    auto b = burst(e, rt, 1, true, live);
    cold.insert(cold.end(), b.begin(), b.end());
    destroyAll(e, rt, live);
  }
  if (!b2b_only) row("cold boot, 1 create", ms(cold), -1);

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
  // Those 20 idle: host CPU per sandbox over 10 s (nothing runs in them),
  // and what each holds.
  idle(e, std::chrono::seconds(3));
  std::vector<std::pair<pid_t, uint64_t>> before;
  for (auto& sb : live) before.emplace_back(sb->vm()->pid(), cpuTicks(sb->vm()->pid()));
  auto t_idle = Clock::now();
  idle(e, std::chrono::seconds(10));
  double secs = msSince(t_idle) / 1000;
  std::vector<double> cpu_pct;
  uint64_t pss = 0, tcg = 0;
  for (auto& [pid, t0] : before) {
    cpu_pct.push_back(100.0 * static_cast<double>(cpuTicks(pid) - t0) /
                      static_cast<double>(::sysconf(_SC_CLK_TCK)) / secs);
    auto [p, c] = pssAndTcg(pid);
    pss += p;
    tcg += c;
  }
  auto cpu = stats(cpu_pct);
  double n_idle = static_cast<double>(std::max<size_t>(before.size(), 1));
  std::printf(
      "\n%zu idle sandboxes over %.0f s: host CPU per sandbox p50 %.2f%% max %.2f%% of a core; "
      "PSS per sandbox %.1f MiB, %.1f MiB without TCG's code buffer\n\n",
      before.size(), secs, cpu.p50, cpu.max, static_cast<double>(pss) / 1024 / n_idle,
      static_cast<double>(pss - tcg) / 1024 / n_idle);
  out["idle_cpu_percent_per_sandbox"] = toJson(cpu);
  out["idle_pss_mib_per_sandbox"] = static_cast<double>(pss) / 1024 / n_idle;
  out["idle_pss_mib_per_sandbox_without_tcg_code"] = static_cast<double>(pss - tcg) / 1024 / n_idle;
  destroyAll(e, rt, live);
  if (box.ok() && !b2b_only) row("bwrap, back to back x20", box.loop(20), -1);

  double worst8 = 0;
  for (int n : {8, 32}) {
    if (b2b_only) break;
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
