// bench/create: what a sandbox costs to create, all in one run so the
// numbers compare: cold boot, restore without the pool, restore from the
// pool, at concurrency 1, 8 and 32 (create-to-first-exec latency and creates
// per second); the idle memory of 20 sandboxes from one template; pause and
// resume of 256 MiB and 1 GiB guests; creates back to back and in bursts
// (create_load.cc; `--load` runs only those, `--b2b` only the back-to-back
// loop with its phase breakdown, to compare two builds side by side).
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/log.h"
#include "base/run_blocking.h"
#include "base/sha256.h"
#include "bench_util.h"
#include "create_load.h"
#include "hypervisor/qemu/qemu.h"
#include "node/runtime.h"
#include "node/template_builder.h"
#include "os/jail.h"

using namespace vessel;
namespace asio = boost::asio;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Env {
  asio::io_context io;
  hypervisor::qemu::QemuHypervisor hv{{}};
  std::unique_ptr<templates::TemplateStore> store;
  std::string root, kernel, image, qemu_version, kernel_sha;
};

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::shared_ptr<const templates::Template> build(Env& e, const std::string& name, uint64_t mib) {
  templates::BuildSpec spec;
  spec.name = name;
  spec.memory_mib = mib;
  node::BuildInputs in{
      e.image, e.kernel, e.kernel_sha, e.qemu_version, hypervisor::Accel::kTcg, e.root + "/work"};
  auto t = runBlocking(e.io, node::buildTemplate(e.hv, *e.store, spec, in));
  if (!t.ok()) {
    std::fprintf(stderr, "template build failed: %s\n", t.error().message().c_str());
    std::exit(1);
  }
  return *t;
}

struct Batch {
  std::vector<double> latency_ms;
  double wall_ms = 0;
  int failures = 0;
};

// `n` creates at once, each timed from its start to its first exec done.
Batch createBatch(Env& e, node::Runtime& rt, const std::string& tmpl, int n, bool cold,
                  std::vector<std::shared_ptr<node::Sandbox>>& out) {
  Batch b;
  int done = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    asio::co_spawn(
        e.io,
        [&, cold]() -> asio::awaitable<void> {
          auto s = Clock::now();
          node::CreateOptions o;
          o.cold = cold;
          auto sb = co_await rt.create(tmpl, std::move(o));
          if (sb.ok()) {
            agentclient::ExecSpec ex;
            ex.argv = {"true"};
            auto r = co_await (*sb)->agent()->run(ex);
            if (r.ok()) {
              b.latency_ms.push_back(ms(Clock::now() - s));
              out.push_back(*sb);
            } else {
              ++b.failures;
            }
          } else {
            std::fprintf(stderr, "create failed: %s\n", sb.error().message().c_str());
            ++b.failures;
          }
          ++done;
        },
        asio::detached);
  }
  e.io.restart();
  while (done < n) e.io.run_one_for(std::chrono::milliseconds(20));
  b.wall_ms = ms(Clock::now() - t0);
  e.io.restart();
  return b;
}

void destroyAll(Env& e, node::Runtime& rt, std::vector<std::shared_ptr<node::Sandbox>>& sbs) {
  for (auto& sb : sbs) (void)runBlocking(e.io, rt.destroy(*sb));
  sbs.clear();
}

// Where a VM's PSS goes: TCG's translated-code buffer (the one anonymous
// rwx mapping; KVM has none), its guest RAM (pages written since the
// restore, private copies of the template's memory file), and the rest
// (QEMU's heap, binary and libraries).
struct PssParts {
  uint64_t tcg_code = 0, guest_ram = 0, other = 0;
};

PssParts pssParts(pid_t pid, const std::string& memory_file) {
  PssParts out;
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps");
  std::string line;
  uint64_t* bucket = &out.other;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    // Mapping header: "start-end perms offset dev inode [path]".
    if (std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < line.find(' ')) {
      std::istringstream h(line);
      std::string range, perms, off, dev, inode, path;
      h >> range >> perms >> off >> dev >> inode >> path;
      if (path == memory_file)
        bucket = &out.guest_ram;
      else if (path.empty() && perms == "rwxp")
        bucket = &out.tcg_code;
      else
        bucket = &out.other;
      continue;
    }
    if (line.rfind("Pss:", 0) == 0) *bucket += std::stoull(line.substr(4));
  }
  return out;
}

uint64_t pssKib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string k;
  uint64_t v;
  while (f >> k) {
    if (k == "Pss:") {
      f >> v;
      return v;
    }
    f.ignore(1 << 12, '\n');
  }
  return 0;
}

// What the memory cgroup of `pid` (v1 or v2) is charged, in KiB.
uint64_t cgroupMemoryKib(pid_t pid, bool unified) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    auto c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    std::string ctrl = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
    std::string file;
    if (unified && ctrl.empty()) file = "/sys/fs/cgroup" + path + "/memory.current";
    if (!unified && ctrl == "memory")
      file = "/sys/fs/cgroup/memory" + path + "/memory.usage_in_bytes";
    if (file.empty()) continue;
    auto v = readFile(file);
    return v.ok() ? std::stoull(*v) / 1024 : 0;
  }
  return 0;
}

}  // namespace

// `bench_create --profile N`: N pooled creates one at a time, with the
// time of each phase (runtime phases plus the first exec), to see where a
// restore spends its time.
int profile(Env& e, int n) {
  node::RuntimeOptions o;
  o.root = e.root + "/rt";
  o.kernel = e.kernel;
  o.pool_size = 1;
  node::Runtime rt(e.io, e.hv, *e.store, o);
  std::map<std::string, std::vector<double>> phases;
  std::vector<std::string> order;
  for (int i = 0; i < n; ++i) {
    (void)runBlocking(e.io, rt.fillPool("bench256"));
    std::vector<std::shared_ptr<node::Sandbox>> live;
    auto t0 = Clock::now();
    auto sb = runBlocking(e.io, rt.create("bench256", node::CreateOptions{}));
    if (!sb.ok()) {
      std::fprintf(stderr, "create: %s\n", sb.error().message().c_str());
      return 1;
    }
    auto t1 = Clock::now();
    agentclient::ExecSpec ex;
    ex.argv = {"true"};
    auto r = runBlocking(e.io, (*sb)->agent()->run(ex));
    auto t2 = Clock::now();
    if (!r.ok()) {
      std::fprintf(stderr, "exec: %s\n", r.error().message().c_str());
      return 1;
    }
    for (const char* name : {"second exec", "third exec"}) {
      auto a = Clock::now();
      auto r2 = runBlocking(e.io, (*sb)->agent()->run(ex));
      if (!r2.ok()) return 1;
      phases[name].push_back(ms(Clock::now() - a));
    }
    for (auto& [name, v] : (*sb)->phases()) {
      if (!phases.count(name)) order.push_back(name);
      phases[name].push_back(v);
    }
    phases["create total"].push_back(ms(t1 - t0));
    phases["first exec"].push_back(ms(t2 - t1));
    live.push_back(*sb);
    destroyAll(e, rt, live);
  }
  order.push_back("create total");
  order.push_back("first exec");
  order.push_back("second exec");
  order.push_back("third exec");
  std::printf("\n| phase | n | p50 ms | p99 ms |\n|---|---|---|---|\n");
  for (auto& name : order) {
    auto s = bench::stats(phases[name]);
    std::printf("| %s | %zu | %.1f | %.1f |\n", name.c_str(), s.n, s.p50, s.p99);
  }
  runBlocking(e.io, [&]() -> asio::awaitable<int> {
    co_await rt.drainPools();
    co_return 0;
  }());
  return 0;
}

// `bench_create --jail-overhead N`: what the VM jail (os/jail.h) costs,
// in one run: create-to-first-exec p50 (restore, no pool, one at a time,
// N creates) and the idle PSS of 8 sandboxes, with QEMU unjailed and jailed.
// The jail's own memory lives in the kernel (a mount namespace, a tmpfs, a
// cgroup), so the table also shows the cgroup's charge of a jailed VM.
int jailOverhead(Env& e, int n) {
  auto uids = os::UidPool::open({1879220000, 1879220999}, "/run/vessel/uids", e.root);
  auto cgroups = os::detectCgroups();
  if (!uids.ok() || !cgroups.ok()) {
    std::fprintf(stderr, "jail: needs root and cgroups\n");
    return 1;
  }
  hypervisor::qemu::JailOptions jo;
  jo.jailer = {*uids, *cgroups, e.root + "/jail", "bench" + std::to_string(::getpid()) + "-"};
  jo.memfile_shim = VESSEL_MEMFILE_SHIM;
  jo.backing_roots = {e.root};
  hypervisor::qemu::QemuHypervisor jailed({"qemu-system-x86_64", jo});
  // The jail as it was before issue 24 (a mount namespace alone) beside
  // today's (network, IPC, UTS and PID namespaces of its own too).
  hypervisor::qemu::JailOptions jo_mnt = jo;
  jo_mnt.jailer.name_prefix = "benchm" + std::to_string(::getpid()) + "-";
  jo_mnt.jailer.own_namespaces = false;
  hypervisor::qemu::QemuHypervisor jailed_mnt({"qemu-system-x86_64", jo_mnt});
  boost::json::array rows;
  std::printf(
      "\n| QEMU | create p50 ms | create p99 ms | idle PSS MiB each (8 x 256 MiB) | cgroup "
      "memory MiB each |\n|---|---|---|---|---|\n");
  for (int mode : {0, 1, 2}) {  // unjailed, jailed (mount ns only), jailed (all)
    bool jail = mode > 0;
    const char* name = mode == 0 ? "unjailed" : mode == 1 ? "jailed, mount ns only" : "jailed";
    node::RuntimeOptions o;
    o.root = e.root + "/rt-" + std::to_string(mode);
    o.kernel = e.kernel;
    o.pool_size = 0;
    hypervisor::Hypervisor& hv = mode == 0   ? e.hv
                                 : mode == 1 ? static_cast<hypervisor::Hypervisor&>(jailed_mnt)
                                             : static_cast<hypervisor::Hypervisor&>(jailed);
    node::Runtime rt(e.io, hv, *e.store, o);
    std::vector<std::shared_ptr<node::Sandbox>> live;
    Batch b;
    for (int i = 0; i < n; ++i) {
      auto one = createBatch(e, rt, "bench256", 1, false, live);
      b.latency_ms.insert(b.latency_ms.end(), one.latency_ms.begin(), one.latency_ms.end());
      b.failures += one.failures;
      destroyAll(e, rt, live);
    }
    for (int i = 0; i < 8; ++i) (void)createBatch(e, rt, "bench256", 1, false, live);
    runBlocking(e.io, [&]() -> asio::awaitable<int> {  // let them settle
      asio::steady_timer t(e.io, std::chrono::seconds(2));
      co_await t.async_wait(asio::use_awaitable);
      co_return 0;
    }());
    uint64_t pss = 0, charged = 0;
    for (auto& sb : live) {
      pid_t pid = sb->vm()->pid();
      pss += pssKib(pid);
      if (jail) charged += cgroupMemoryKib(pid, cgroups->unified);
    }
    size_t m = live.size();
    destroyAll(e, rt, live);
    auto st = bench::stats(b.latency_ms);
    double each = m ? static_cast<double>(pss) / 1024 / static_cast<double>(m) : 0;
    double cg_each = m ? static_cast<double>(charged) / 1024 / static_cast<double>(m) : 0;
    std::printf("| %s | %.0f | %.0f | %.1f | %s |\n", name, st.p50, st.p99, each,
                jail ? std::to_string(cg_each).substr(0, 5).c_str() : "-");
    std::fflush(stdout);
    boost::json::object j = bench::toJson(st);
    j["jail"] = jail;
    j["mode"] = name;
    j["failures"] = b.failures;
    j["idle_pss_mib_each"] = each;
    j["sandboxes"] = m;
    if (jail) j["cgroup_memory_mib_each"] = cg_each;
    rows.push_back(std::move(j));
  }
  bench::writeResults("create_jail", boost::json::object{{"benchmark", "create_jail"},
                                                         {"accel", "tcg"},
                                                         {"rows", std::move(rows)}});
  return 0;
}

// Long because a benchmark reads best as its script: each mode's set-up,
// measured runs and table, in order.
int main(int argc, char** argv) {
  initLogging("warn");
  Env e;
  e.kernel = bench::env("VESSEL_KERNEL");
  e.image = bench::env("VESSEL_MINIMAL_IMAGE");
  e.root = "/tmp/vessel-bench-create-" + std::to_string(::getpid());
  fs::create_directories(e.root + "/work");
  fs::create_directories(e.root + "/templates");
  e.qemu_version = *hypervisor::qemu::qemuVersion("qemu-system-x86_64");
  e.kernel_sha = *sha256File(e.kernel);
  e.store = std::make_unique<templates::TemplateStore>(e.root + "/templates", e.qemu_version,
                                                       e.kernel_sha);
  std::printf("building templates (256 MiB and 1 GiB)...\n");
  auto t256 = build(e, "bench256", 256);
  auto load = [&](boost::json::object& out, bool b2b_only = false) {
    const char* deb = std::getenv("VESSEL_DEBIAN_IMAGE");
    bench::LoadEnv le{e.io, e.hv, *e.store, e.root, e.kernel, "bench256", deb ? deb : ""};
    return bench::runLoad(le, out, b2b_only);
  };
  if (argc == 2 && (std::string(argv[1]) == "--load" || std::string(argv[1]) == "--b2b")) {
    bool b2b = std::string(argv[1]) == "--b2b";
    boost::json::object results{{"benchmark", b2b ? "create-b2b" : "create-load"},
                                {"accel", "tcg"}};
    int rc = load(results, b2b);
    fs::remove_all(e.root);
    bench::writeResults(b2b ? "create-b2b" : "create-load", results);
    return rc;
  }
  if (argc == 3 && std::string(argv[1]) == "--profile") {
    int rc = profile(e, std::atoi(argv[2]));
    fs::remove_all(e.root);
    return rc;
  }
  if (argc == 3 && std::string(argv[1]) == "--jail-overhead") {
    int rc = jailOverhead(e, std::atoi(argv[2]));
    fs::remove_all(e.root);
    return rc;
  }
  auto t1g = build(e, "bench1g", 1024);

  node::RuntimeOptions o;
  o.root = e.root + "/rt";
  o.kernel = e.kernel;
  o.pool_size = 0;
  node::Runtime rt(e.io, e.hv, *e.store, o);
  std::vector<std::shared_ptr<node::Sandbox>> live;

  boost::json::object results{{"benchmark", "create"}, {"accel", "tcg"}};
  std::printf(
      "\n| mode | concurrency | n | p50 ms | p99 ms | creates/s |\n|---|---|---|---|---|---|\n");
  auto row = [&](const char* mode, int c, const Batch& b, boost::json::array& arr) {
    auto s = bench::stats(b.latency_ms);
    double rate = b.wall_ms > 0 ? 1000.0 * static_cast<double>(s.n) / b.wall_ms : 0;
    std::printf("| %s | %d | %zu | %.0f | %.0f | %.1f |\n", mode, c, s.n, s.p50, s.p99, rate);
    std::fflush(stdout);
    boost::json::object j = bench::toJson(s);
    j["mode"] = mode;
    j["concurrency"] = c;
    j["creates_per_s"] = rate;
    j["failures"] = b.failures;
    arr.push_back(std::move(j));
    return s;
  };
  boost::json::array rows;
  // Cold boot: 5 sequential.
  Batch cold;
  for (int i = 0; i < 5; ++i) {
    auto b = createBatch(e, rt, "bench256", 1, true, live);
    cold.latency_ms.insert(cold.latency_ms.end(), b.latency_ms.begin(), b.latency_ms.end());
    cold.wall_ms += b.wall_ms;
    cold.failures += b.failures;
    destroyAll(e, rt, live);
  }
  auto cold_s = row("cold boot", 1, cold, rows);
  bench::Stats pool1{}, warm1{};
  rt.setPoolMode(node::RuntimeOptions::PoolMode::kIncoming);
  for (int c : {1, 8, 32}) {
    Batch nopool;
    int reps = c == 1 ? 10 : 1;
    for (int i = 0; i < reps; ++i) {
      auto b = createBatch(e, rt, "bench256", c, false, live);
      nopool.latency_ms.insert(nopool.latency_ms.end(), b.latency_ms.begin(), b.latency_ms.end());
      nopool.wall_ms += b.wall_ms;
      nopool.failures += b.failures;
      destroyAll(e, rt, live);
    }
    row("restore, no pool", c, nopool, rows);
    Batch pooled;
    for (int i = 0; i < reps; ++i) {
      rt.setPoolSize(static_cast<size_t>(c));
      (void)runBlocking(e.io, rt.fillPool("bench256"));
      rt.setPoolSize(0);  // measure the pool alone: no refill during the batch
      auto b = createBatch(e, rt, "bench256", c, false, live);
      pooled.latency_ms.insert(pooled.latency_ms.end(), b.latency_ms.begin(), b.latency_ms.end());
      pooled.wall_ms += b.wall_ms;
      pooled.failures += b.failures;
      destroyAll(e, rt, live);
    }
    auto s = row("restore from pool (-incoming defer)", c, pooled, rows);
    if (c == 1) pool1 = s;
    rt.setPoolMode(node::RuntimeOptions::PoolMode::kWarm);
    Batch warm;
    for (int i = 0; i < reps; ++i) {
      rt.setPoolSize(static_cast<size_t>(c));
      (void)runBlocking(e.io, rt.fillPool("bench256"));
      rt.setPoolSize(0);
      auto b = createBatch(e, rt, "bench256", c, false, live);
      warm.latency_ms.insert(warm.latency_ms.end(), b.latency_ms.begin(), b.latency_ms.end());
      warm.wall_ms += b.wall_ms;
      warm.failures += b.failures;
      destroyAll(e, rt, live);
    }
    auto w = row("warm pool (restored ahead)", c, warm, rows);
    if (c == 1) warm1 = w;
    rt.setPoolMode(node::RuntimeOptions::PoolMode::kIncoming);
  }
  results["create"] = std::move(rows);
  double speedup = pool1.p50 > 0 ? cold_s.p50 / pool1.p50 : 0;
  double warm_speedup = warm1.p50 > 0 ? cold_s.p50 / warm1.p50 : 0;
  std::printf(
      "\ncold boot p50 / pooled restore p50 (concurrency 1): %.1fx (incoming pool), %.1fx "
      "(warm pool)\n",
      speedup, warm_speedup);
  results["cold_over_pool_p50"] = speedup;
  results["cold_over_warm_pool_p50"] = warm_speedup;

  // Idle memory: 20 sandboxes from one template, created as vesseld does
  // by default (from the warm pool), each after its first command, with and
  // without the pool's warm-up command: does warming cost idle memory (the
  // exec path's translated code), or only move when it is translated?
  rt.setPoolMode(node::RuntimeOptions::PoolMode::kWarm);
  auto idle = [&](bool warm_exec) {
    rt.setWarmExec(warm_exec);
    rt.setPoolSize(20);
    (void)runBlocking(e.io, rt.fillPool("bench256"));
    rt.setPoolSize(0);
    (void)createBatch(e, rt, "bench256", 20, false, live);
    runBlocking(e.io, [&]() -> asio::awaitable<int> {  // let them settle
      asio::steady_timer t(e.io, std::chrono::seconds(2));
      co_await t.async_wait(asio::use_awaitable);
      co_return 0;
    }());
    uint64_t pss = 0;
    PssParts parts;
    for (auto& sb : live) {
      pss += pssKib(sb->vm()->pid());
      auto p = pssParts(sb->vm()->pid(), t256->path(templates::kMemoryFile));
      parts.tcg_code += p.tcg_code;
      parts.guest_ram += p.guest_ram;
      parts.other += p.other;
    }
    destroyAll(e, rt, live);
    // The price: create-to-first-exec from such a pool, one at a time.
    Batch first;
    for (int i = 0; i < 10; ++i) {
      rt.setPoolSize(1);
      (void)runBlocking(e.io, rt.fillPool("bench256"));
      rt.setPoolSize(0);
      auto b = createBatch(e, rt, "bench256", 1, false, live);
      first.latency_ms.insert(first.latency_ms.end(), b.latency_ms.begin(), b.latency_ms.end());
      destroyAll(e, rt, live);
    }
    auto lat = bench::stats(first.latency_ms);
    double nominal = 20.0 * 256 * 1024;
    double share = 100.0 * static_cast<double>(pss) / nominal;
    auto each = [](uint64_t kib) { return static_cast<double>(kib) / 1024 / 20; };
    std::printf("| %s | %.1f | %.1f%% | %.1f | %.1f | %.1f | %.1f%% | %.0f |\n",
                warm_exec ? "yes (default)" : "no", static_cast<double>(pss) / 1024 / 20, share,
                each(parts.tcg_code), each(parts.guest_ram), each(parts.other),
                100.0 * static_cast<double>(pss - parts.tcg_code) / nominal, lat.p50);
    std::fflush(stdout);
    return boost::json::object{{"warm_exec", warm_exec},
                               {"idle_pss_mib_each", each(pss)},
                               {"idle_pss_percent_of_nominal", share},
                               {"idle_pss_mib_each_tcg_code", each(parts.tcg_code)},
                               {"idle_pss_mib_each_guest_ram", each(parts.guest_ram)},
                               {"idle_pss_mib_each_other", each(parts.other)},
                               {"idle_pss_percent_without_tcg_code",
                                100.0 * static_cast<double>(pss - parts.tcg_code) / nominal},
                               {"first_exec_p50_ms", lat.p50},
                               {"first_exec_p99_ms", lat.p99}};
  };
  std::printf(
      "\nidle PSS of 20 sandboxes (256 MiB each) from the warm pool; per sandbox, MiB:\n\n"
      "| warm-up command | PSS | of nominal | TCG code | guest RAM written | QEMU heap, binary, "
      "libraries | of nominal without TCG code | create-to-first-exec p50 ms |\n"
      "|---|---|---|---|---|---|---|---|\n");
  boost::json::array idle_rows;
  idle_rows.push_back(idle(true));
  idle_rows.push_back(idle(false));
  rt.setWarmExec(true);
  results["idle"] = std::move(idle_rows);

  // Pause and resume, 256 MiB and 1 GiB.
  std::printf("\n| guest RAM | pause ms | resume ms | state file MiB |\n|---|---|---|---|\n");
  boost::json::array pr;
  for (auto [name, mib] : {std::pair<const char*, int>{"bench256", 256}, {"bench1g", 1024}}) {
    std::vector<double> p_ms, r_ms;
    double state_mib = 0;
    for (int i = 0; i < 3; ++i) {
      auto b = createBatch(e, rt, name, 1, false, live);
      if (live.empty()) break;
      auto sb = live.back();
      auto t0 = Clock::now();
      auto ps = runBlocking(e.io, rt.pause(*sb));
      auto t1 = Clock::now();
      if (!ps.ok()) {
        std::fprintf(stderr, "pause: %s\n", ps.error().message().c_str());
        break;
      }
      std::error_code ec;
      state_mib = static_cast<double>(fs::file_size(sb->dir() + "/pause.state", ec)) / (1 << 20);
      auto r = runBlocking(e.io, rt.resume(sb->id()));
      auto t2 = Clock::now();
      if (!r.ok()) {
        std::fprintf(stderr, "resume: %s\n", r.error().message().c_str());
        break;
      }
      p_ms.push_back(ms(t1 - t0));
      r_ms.push_back(ms(t2 - t1));
      live.back() = *r;
      destroyAll(e, rt, live);
    }
    auto ps = bench::stats(p_ms), rs = bench::stats(r_ms);
    std::printf("| %d MiB | %.0f | %.0f | %.1f |\n", mib, ps.p50, rs.p50, state_mib);
    pr.push_back({{"memory_mib", mib},
                  {"pause_ms", bench::toJson(ps)},
                  {"resume_ms", bench::toJson(rs)},
                  {"state_mib", state_mib}});
  }
  results["pause_resume"] = std::move(pr);
  (void)load(results);
  runBlocking(e.io, [&]() -> asio::awaitable<int> {
    co_await rt.drainPools();
    co_return 0;
  }());
  fs::remove_all(e.root);
  bench::writeResults("create", results);
  return 0;
}
