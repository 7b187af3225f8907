// bench/density: how many idle sandboxes one node holds and what each costs
// while it waits (issue 29). A real vesseld as `make up` starts it (real
// QEMU, egress slots, the built-in `minimal` template), the tenant's
// quotas lifted; sandboxes are created up to each step of
// VESSEL_DENSITY_STEPS (default 100,250,500,1000), and at each step, after
// 10 s of quiet:
//   - memory per sandbox: the drop in MemAvailable since before the first
//     create, divided by N (vesseld's, the gateway's and the kernel's share
//     counted), beside the summed PSS of the QEMUs split into TCG's code
//     buffer, guest RAM and the rest;
//   - idle CPU: what the QEMUs, vesseld and the gateway used over 10 s, per
//     sandbox and in all (% of one core);
//   - exec p50/p99 of `true` across a sample of the idle sandboxes (their
//     sessions opened beforehand, so only the exec is timed);
//   - create p50/p99 of the creates that brought the node to this step;
//   - vesseld's file descriptors and threads, network namespaces, nft tables;
//   - what stopped the ramp, if it stopped: a failed create (its error), or
//     MemAvailable under VESSEL_DENSITY_RESERVE_MIB (default 1536), where it
//     stops before the OOM killer would.
// Table on stdout, JSON in bench/results/density.json. Needs root.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "bench_util.h"
#include "vesseld_harness.h"

namespace vessel::bench {
namespace {

using Clock = std::chrono::steady_clock;
using testing::str;

uint64_t memAvailableKib() {
  std::ifstream f("/proc/meminfo");
  std::string k;
  uint64_t v = 0;
  while (f >> k >> v) {
    if (k == "MemAvailable:") return v;
    f.ignore(1 << 10, '\n');
  }
  return 0;
}

// utime + stime of a process, in clock ticks (0 once it is gone).
uint64_t cpuTicks(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(s.substr(close + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  // Fields after the command: state is 3rd; utime 14th, stime 15th.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return utime + stime;
}

struct Pss {
  uint64_t tcg_code = 0, guest_ram = 0, other = 0;
  uint64_t total() const { return tcg_code + guest_ram + other; }
};

// A QEMU's PSS by kind: TCG's code buffer (its one anonymous rwx mapping),
// guest RAM (the template's memory file, mapped private, and the anonymous
// memory-backend mapping), the rest (heap, binary, libraries).
void addPss(int pid, Pss& out) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps");
  std::string line;
  uint64_t* bucket = &out.other;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    if (std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < line.find(' ')) {
      std::istringstream h(line);
      std::string range, perms, off, dev, inode, path;
      h >> range >> perms >> off >> dev >> inode >> path;
      if (path.empty() && perms == "rwxp")
        bucket = &out.tcg_code;
      else if (path.find("/mem") != std::string::npos || path.find("memory") != std::string::npos)
        bucket = &out.guest_ram;
      else
        bucket = &out.other;
      continue;
    }
    if (line.rfind("Pss:", 0) == 0) *bucket += std::stoull(line.substr(4));
  }
}

uint64_t pssKib(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string k;
  uint64_t v = 0;
  while (f >> k) {
    if (k == "Pss:" && f >> v) return v;
    f.ignore(1 << 12, '\n');
  }
  return 0;
}

size_t countDir(const std::string& path) {
  size_t n = 0;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

int threadsOf(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string k;
  while (f >> k) {
    if (k == "Threads:") {
      int n = 0;
      f >> n;
      return n;
    }
    f.ignore(1 << 10, '\n');
  }
  return 0;
}

// Processes named `comm` (the gateway runs as its own process).
std::vector<int> pidsNamed(const std::string& comm) {
  std::vector<int> out;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
      std::ifstream f(std::string("/proc/") + e->d_name + "/comm");
      std::string c;
      if (std::getline(f, c) && c == comm) out.push_back(std::atoi(e->d_name));
    }
    closedir(d);
  }
  return out;
}

size_t nftTables() {
  FILE* p = popen("nft list tables 2>/dev/null | wc -l", "r");
  if (!p) return 0;
  size_t n = 0;
  if (fscanf(p, "%zu", &n) != 1) n = 0;
  pclose(p);
  return n;
}

struct Step {
  int target = 0, reached = 0;
  double mem_avail_mib_each = 0, pss_mib_each = 0, tcg_mib_each = 0, ram_mib_each = 0,
         other_mib_each = 0, vesseld_pss_mib = 0, gateway_pss_mib = 0;
  double cpu_pct_each = 0, cpu_pct_all = 0, vesseld_cpu_pct = 0, gateway_cpu_pct = 0;
  Stats exec, create;
  int exec_failed = 0;
  size_t vesseld_fds = 0, netns = 0, nft = 0;
  int vesseld_threads = 0;
  std::string limit;
};

int envInt(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

std::vector<int> steps() {
  std::string s = std::getenv("VESSEL_DENSITY_STEPS") ? std::getenv("VESSEL_DENSITY_STEPS")
                                                      : "100,250,500,1000";
  std::vector<int> out;
  std::istringstream in(s);
  std::string part;
  while (std::getline(in, part, ','))
    if (int n = std::atoi(part.c_str()); n > 0) out.push_back(n);
  return out;
}

// Long because a benchmark reads best as its script: the ramp, each
// step's measurements, the table.
int run() {
  testing::Vesseld d(VESSELD_PATH, {"--tenant-max-sandboxes=100000", "--tenant-max-memory=10000000",
                                    "--tenant-max-vcpus=100000", "--tenant-max-disk=10000000",
                                    "--default-idle-timeout=0", "--default-lifetime=86400",
                                    "--max-lifetime=86400"});
  if (!d.start()) {
    std::fprintf(stderr, "vesseld did not start:\n%s\n", d.log().c_str());
    return 1;
  }
  const int concurrency = envInt("VESSEL_DENSITY_CONCURRENCY", 4);
  const int sample = envInt("VESSEL_DENSITY_EXEC_SAMPLE", 50);
  const uint64_t reserve_kib =
      static_cast<uint64_t>(envInt("VESSEL_DENSITY_RESERVE_MIB", 1536)) * 1024;
  std::this_thread::sleep_for(std::chrono::seconds(5));
  const uint64_t base_avail = memAvailableKib();
  const long hz = sysconf(_SC_CLK_TCK);

  std::vector<std::string> ids;
  std::map<std::string, std::string> tokens;
  std::vector<Step> out;
  std::string stopped;
  for (int target : steps()) {
    Step st;
    st.target = target;
    std::mutex mu;
    std::vector<double> create_ms;
    std::atomic<int> next{static_cast<int>(ids.size())};
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int w = 0; w < concurrency; ++w)
      workers.emplace_back([&] {
        while (!stop && next++ < target) {
          if (memAvailableKib() < reserve_kib) {
            std::lock_guard<std::mutex> g(mu);
            if (stopped.empty())
              stopped = "host memory: MemAvailable under the reserve of " +
                        std::to_string(reserve_kib / 1024) + " MiB";
            stop = true;
            return;
          }
          auto t = Clock::now();
          std::string why;
          std::string id = d.createSandbox("{}", &why);
          double ms = msSince(t);
          std::lock_guard<std::mutex> g(mu);
          if (id.empty()) {
            if (stopped.empty()) stopped = "create failed: " + why;
            stop = true;
            return;
          }
          ids.push_back(id);
          create_ms.push_back(ms);
        }
      });
    for (auto& w : workers) w.join();
    st.reached = static_cast<int>(ids.size());
    st.create = stats(create_ms);
    st.limit = stopped;
    std::fprintf(stderr, "density: %d sandboxes (%s)\n", st.reached,
                 stopped.empty() ? "step reached" : stopped.c_str());
    if (ids.empty()) break;

    // Sessions for the exec sample, opened before the quiet period.
    std::vector<std::string> picked;
    std::mt19937 rng(static_cast<unsigned>(target));
    std::vector<std::string> pool = ids;
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int i = 0; i < sample && i < static_cast<int>(pool.size()); ++i) {
      auto& id = pool[static_cast<size_t>(i)];
      if (!tokens.count(id)) tokens[id] = d.session(id);
      if (!tokens[id].empty()) picked.push_back(id);
    }

    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::vector<int> qemus = d.qemuPids();
    std::vector<int> gateways = pidsNamed("vessel-gateway");
    auto ticks = [&] {
      uint64_t q = 0, g = 0;
      for (int p : qemus) q += cpuTicks(p);
      for (int p : gateways) g += cpuTicks(p);
      return std::array<uint64_t, 3>{q, cpuTicks(d.pid()), g};
    };
    auto t0 = ticks();
    auto w0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(10));
    auto t1 = ticks();
    double secs = msSince(w0) / 1000;
    auto pct = [&](uint64_t a, uint64_t b) {
      return 100.0 * static_cast<double>(b - a) / static_cast<double>(hz) / secs;
    };
    double n = static_cast<double>(st.reached);
    st.vesseld_cpu_pct = pct(t0[1], t1[1]);
    st.gateway_cpu_pct = pct(t0[2], t1[2]);
    st.cpu_pct_all = pct(t0[0], t1[0]) + st.vesseld_cpu_pct + st.gateway_cpu_pct;
    st.cpu_pct_each = st.cpu_pct_all / n;

    uint64_t avail = memAvailableKib();
    st.mem_avail_mib_each =
        base_avail > avail ? static_cast<double>(base_avail - avail) / 1024 / n : 0;
    Pss pss;
    for (int p : qemus) addPss(p, pss);
    st.pss_mib_each = static_cast<double>(pss.total()) / 1024 / n;
    st.tcg_mib_each = static_cast<double>(pss.tcg_code) / 1024 / n;
    st.ram_mib_each = static_cast<double>(pss.guest_ram) / 1024 / n;
    st.other_mib_each = static_cast<double>(pss.other) / 1024 / n;
    st.vesseld_pss_mib = static_cast<double>(pssKib(d.pid())) / 1024;
    for (int p : gateways) st.gateway_pss_mib += static_cast<double>(pssKib(p)) / 1024;
    st.vesseld_fds = countDir("/proc/" + std::to_string(d.pid()) + "/fd");
    st.vesseld_threads = threadsOf(d.pid());
    st.netns = countDir("/run/netns");
    st.nft = nftTables();

    // Each sampled sandbox answers its next exec; only the exec is timed.
    std::vector<double> exec_ms;
    for (auto& id : picked) {
      auto t = Clock::now();
      auto x = d.exec(tokens[id], R"({"cmd":["true"]})");
      if (x.exit_code == 0)
        exec_ms.push_back(msSince(t));
      else
        ++st.exec_failed;
    }
    st.exec = stats(exec_ms);
    out.push_back(st);
    if (!stopped.empty()) break;
  }

  std::printf(
      "\n| sandboxes | MemAvailable drop MiB each | PSS MiB each (TCG code / guest RAM / rest) | "
      "vesseld / gateway PSS MiB | idle CPU %% of a core: each / all (vesseld, gateway) | "
      "exec p50 / p99 ms (n, failed) | create p50 / p99 ms | vesseld fds / threads | netns / nft "
      "tables | limit |\n|---|---|---|---|---|---|---|---|---|---|\n");
  boost::json::array rows;
  for (auto& s : out) {
    std::printf(
        "| %d of %d | %.1f | %.1f (%.1f / %.1f / %.1f) | %.0f / %.0f | %.3f / %.1f (%.1f, %.1f) | "
        "%.0f / %.0f (%zu, %d) | %.0f / %.0f | %zu / %d | %zu / %zu | %s |\n",
        s.reached, s.target, s.mem_avail_mib_each, s.pss_mib_each, s.tcg_mib_each, s.ram_mib_each,
        s.other_mib_each, s.vesseld_pss_mib, s.gateway_pss_mib, s.cpu_pct_each, s.cpu_pct_all,
        s.vesseld_cpu_pct, s.gateway_cpu_pct, s.exec.p50, s.exec.p99, s.exec.n, s.exec_failed,
        s.create.p50, s.create.p99, s.vesseld_fds, s.vesseld_threads, s.netns, s.nft,
        s.limit.empty() ? "-" : s.limit.c_str());
    rows.push_back({{"target", s.target},
                    {"reached", s.reached},
                    {"mem_available_mib_each", s.mem_avail_mib_each},
                    {"pss_mib_each", s.pss_mib_each},
                    {"pss_tcg_code_mib_each", s.tcg_mib_each},
                    {"pss_guest_ram_mib_each", s.ram_mib_each},
                    {"pss_other_mib_each", s.other_mib_each},
                    {"vesseld_pss_mib", s.vesseld_pss_mib},
                    {"gateway_pss_mib", s.gateway_pss_mib},
                    {"idle_cpu_pct_each", s.cpu_pct_each},
                    {"idle_cpu_pct_all", s.cpu_pct_all},
                    {"vesseld_cpu_pct", s.vesseld_cpu_pct},
                    {"gateway_cpu_pct", s.gateway_cpu_pct},
                    {"exec_ms", toJson(s.exec)},
                    {"exec_failed", s.exec_failed},
                    {"create_ms", toJson(s.create)},
                    {"vesseld_fds", s.vesseld_fds},
                    {"vesseld_threads", s.vesseld_threads},
                    {"netns", s.netns},
                    {"nft_tables", s.nft},
                    {"limit", s.limit}});
  }
  writeResults("density", {{"steps", rows}, {"concurrency", concurrency}});

  // Delete them all, a few at a time.
  std::atomic<size_t> next{0};
  std::vector<std::thread> deleters;
  for (int w = 0; w < concurrency; ++w)
    deleters.emplace_back([&] {
      for (size_t i; (i = next++) < ids.size();) (void)d.deleteSandbox(ids[i]);
    });
  for (auto& t : deleters) t.join();
  d.stop();
  return 0;
}

}  // namespace
}  // namespace vessel::bench

int main() { return vessel::bench::run(); }
