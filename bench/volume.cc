// bench/volume (issue 27): storage through a volume beside the sandbox's
// own root disk and beside the host filesystem directly, in one run, and
// the cost a mount adds to a create. A real vesseld (--role=all, TCG, no
// warm pool, so every create is the same cold restore) and one sandbox of
// the `minimal` template (busybox) mounting a fresh volume at /data:
//   1. sequential write: `dd if=/dev/zero bs=1M count=N conv=fsync`, in the
//      volume (/data), on the root disk (/root, the sandbox's ext4 disk)
//      and in a directory on the host's filesystem (where vesseld keeps its
//      volume images);
//   2. sequential read of that file with dd, the guest's page cache dropped
//      first (the host's is left warm in every column: nothing is dropped
//      on the host);
//   3. small-file creates: a shell loop writing F files of a few bytes,
//      then `sync`, in the same three places;
//   4. create p50 of C sandboxes without volumes beside C mounting one
//      (POST /v1/sandboxes to its operation done, alternating).
// Each guest step is one exec timed on the host, less the p50 of an exec
// of `true` (the exec's own cost); each host step is one `sh -c` timed
// likewise. One run; table on stdout, JSON in bench/results/volume.json.
// Flags: --seq-mib=32 --files=500 --creates=5 --volume-mib=128. Root only.
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.h"
#include "vesseld_harness.h"

namespace vessel::bench {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

struct Flags {
  int seq_mib = 32, files = 500, creates = 5, volume_mib = 128;
};

bool parseFlags(int argc, char** argv, Flags& f) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto eq = a.find('=');
    std::string k = a.substr(0, eq);
    int v = eq == std::string::npos ? 0 : std::atoi(a.c_str() + eq + 1);
    int* dst = k == "--seq-mib"      ? &f.seq_mib
               : k == "--files"      ? &f.files
               : k == "--creates"    ? &f.creates
               : k == "--volume-mib" ? &f.volume_mib
                                     : nullptr;
    if (!dst || v <= 0) {
      std::fprintf(stderr,
                   "usage: bench_volume [--seq-mib=32] [--files=500] [--creates=5] "
                   "[--volume-mib=128]\n");
      return false;
    }
    *dst = v;
  }
  return true;
}

// Runs shell commands in one place (a sandbox or the host) and times them.
class Place {
 public:
  virtual ~Place() = default;
  // Wall milliseconds of `cmd`, or -1 (and `why_`) if it failed.
  virtual double run(const std::string& cmd) = 0;
  std::string why_;
  double overhead_ms_ = 0;  // p50 of `true`
  void calibrate() {
    std::vector<double> v;
    for (int i = 0; i < 9; ++i) v.push_back(run("true"));
    overhead_ms_ = stats(v).p50;
  }
  double timed(const std::string& cmd) {
    double ms = run(cmd);
    return ms < 0 ? -1 : std::max(ms - overhead_ms_, 0.1);
  }
};

class GuestPlace : public Place {
 public:
  GuestPlace(const testing::Vesseld& d, std::string token) : d_(d), token_(std::move(token)) {}
  double run(const std::string& cmd) override {
    std::string body = json::serialize(json::object{{"shell", cmd}, {"user", "root"}});
    auto t = Clock::now();
    auto x = d_.exec(token_, body);
    double ms = msSince(t);
    if (x.exit_code != 0) {
      why_ = "guest `" + cmd.substr(0, 60) + "`: exit " + std::to_string(x.exit_code) + " " +
             x.out + x.err;
      return -1;
    }
    return ms;
  }
  std::string out(const std::string& cmd) {
    return d_.exec(token_, json::serialize(json::object{{"shell", cmd}, {"user", "root"}})).out;
  }

 private:
  const testing::Vesseld& d_;
  std::string token_;
};

class HostPlace : public Place {
 public:
  double run(const std::string& cmd) override {
    std::string full = "sh -c '" + cmd + "' >/dev/null 2>&1";  // our own commands: no ' in them
    auto t = Clock::now();
    int rc = std::system(full.c_str());
    double ms = msSince(t);
    if (rc != 0) {
      why_ = "host `" + cmd.substr(0, 60) + "`: status " + std::to_string(rc);
      return -1;
    }
    return ms;
  }
};

struct IoResult {
  double write_mib_s = -1, read_mib_s = -1, creates_s = -1;
  double write_ms = -1, read_ms = -1, files_ms = -1, overhead_ms = 0;
  std::string why;
};

// The three measurements in `dir` of `p`; `guest` drops the guest's page
// cache before the read.
IoResult measure(Place& p, const std::string& dir, bool guest, const Flags& f) {
  IoResult r;
  p.calibrate();
  r.overhead_ms = p.overhead_ms_;
  std::string d = dir + "/vessel-bench";
  if (p.run("rm -rf " + d + " && mkdir -p " + d + "/files && sync") < 0) {
    r.why = p.why_;
    return r;
  }
  r.write_ms = p.timed("dd if=/dev/zero of=" + d + "/seq bs=1M count=" + std::to_string(f.seq_mib) +
                       " conv=fsync 2>/dev/null");
  if (guest) p.run("sync && echo 3 > /proc/sys/vm/drop_caches");
  r.read_ms = p.timed("dd if=" + d + "/seq of=/dev/null bs=1M 2>/dev/null");
  r.files_ms = p.timed("cd " + d + "/files && i=0 && while [ $i -lt " + std::to_string(f.files) +
                       " ]; do echo file $i > f$i; i=$((i+1)); done && sync");
  if (r.write_ms > 0) r.write_mib_s = f.seq_mib * 1000.0 / r.write_ms;
  if (r.read_ms > 0) r.read_mib_s = f.seq_mib * 1000.0 / r.read_ms;
  if (r.files_ms > 0) r.creates_s = f.files * 1000.0 / r.files_ms;
  if (r.write_ms < 0 || r.read_ms < 0 || r.files_ms < 0) r.why = p.why_;
  p.run("rm -rf " + d);
  return r;
}

json::object js(const IoResult& r) {
  return {{"write_mib_s", r.write_mib_s},
          {"read_mib_s", r.read_mib_s},
          {"creates_per_s", r.creates_s},
          {"write_ms", r.write_ms},
          {"read_ms", r.read_ms},
          {"files_ms", r.files_ms},
          {"exec_overhead_ms", r.overhead_ms},
          {"error", r.why}};
}

std::string cell(double v) {
  if (v < 0) return "failed";
  char b[32];
  std::snprintf(b, sizeof b, v >= 100 ? "%.0f" : "%.1f", v);
  return b;
}

struct CreateResult {
  Stats plain, mounted;
  std::string why;
};

// `n` creates without volumes and `n` mounting `volume`, alternating so
// that drift over the run falls on both; each sandbox is deleted at once.
CreateResult measureCreates(const testing::Vesseld& d, const std::string& volume, int n) {
  CreateResult out;
  std::vector<double> plain, mounted;
  std::string with = json::serialize(
      json::object{{"template", "minimal"},
                   {"volumes", json::array{json::object{{"name", volume}, {"path", "/data"}}}}});
  for (int i = 0; i < n; ++i) {
    for (bool vol : {false, true}) {
      std::string why;
      auto t = Clock::now();
      std::string id = d.createSandbox(vol ? with : R"({"template":"minimal"})", &why);
      double ms = msSince(t);
      if (id.empty()) {
        out.why = why;
        continue;
      }
      (vol ? mounted : plain).push_back(ms);
      d.deleteSandbox(id);
    }
  }
  out.plain = stats(plain);
  out.mounted = stats(mounted);
  return out;
}

void printTable(const Flags& f, const IoResult& vol, const IoResult& root, const IoResult& host,
                const CreateResult& c) {
  std::printf("\nbench_volume: one run (TCG), %d MiB sequential, %d small files\n\n", f.seq_mib,
              f.files);
  std::printf("| %-34s | %14s | %14s | %10s |\n", "", "volume (/data)", "root disk", "host fs");
  std::printf("|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(16, '-').c_str(),
              std::string(16, '-').c_str(), std::string(12, '-').c_str());
  auto row = [](const char* what, double a, double b, double c) {
    std::printf("| %-34s | %14s | %14s | %10s |\n", what, cell(a).c_str(), cell(b).c_str(),
                cell(c).c_str());
  };
  row("sequential write MiB/s (fsync)", vol.write_mib_s, root.write_mib_s, host.write_mib_s);
  row("sequential read MiB/s", vol.read_mib_s, root.read_mib_s, host.read_mib_s);
  row("small-file creates/s", vol.creates_s, root.creates_s, host.creates_s);
  row("exec overhead subtracted, ms", vol.overhead_ms, root.overhead_ms, host.overhead_ms);
  std::printf("\n| %-34s | %10s | %10s | %10s |\n", "create, ms", "p50", "min", "max");
  std::printf("|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(12, '-').c_str(),
              std::string(12, '-').c_str(), std::string(12, '-').c_str());
  for (auto [what, s] :
       {std::pair{"no volume", c.plain}, std::pair{"one volume mounted", c.mounted}})
    std::printf("| %-34s | %10.0f | %10.0f | %10.0f |\n", what, s.p50, s.min, s.max);
  std::printf("| %-34s | %10.0f | %10s | %10s |\n", "added by the mount (p50)",
              c.mounted.p50 - c.plain.p50, "", "");
  for (const auto* r : {&vol, &root, &host})
    if (!r->why.empty()) std::printf("  failed: %s\n", r->why.c_str());
  if (!c.why.empty()) std::printf("  a create failed: %s\n", c.why.c_str());
}

// Long because a benchmark reads best as its script: the daemon, the
// volume, the sandbox and its three places, then the creates.
int run(const Flags& f) {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "bench_volume needs root (vesseld, loop devices, mounts)\n");
    return 2;
  }
  testing::Vesseld d(VESSELD_PATH, {"--role=all", "--warm-pool=none"});
  if (!d.start()) {
    std::fprintf(stderr, "vesseld did not start:\n%s\n", d.log().c_str());
    return 1;
  }
  const std::string vol = "bench";
  auto made = d.call("POST", "/v1/volumes",
                     json::serialize(json::object{{"name", vol}, {"size_mib", f.volume_mib}}));
  if (made.status != 201) {
    std::fprintf(stderr, "volume create answered %d: %s\n", made.status, made.body.c_str());
    return 1;
  }
  std::string why;
  std::string id = d.createSandbox(
      json::serialize(
          json::object{{"template", "minimal"},
                       {"volumes", json::array{json::object{{"name", vol}, {"path", "/data"}}}}}),
      &why);
  if (id.empty()) {
    std::fprintf(stderr, "sandbox: %s\n%s\n", why.c_str(), d.log().c_str());
    return 1;
  }
  GuestPlace guest(d, d.session(id));
  // Where each guest directory lives, so the table's columns say what they are.
  std::string mounts = guest.out("grep -E ' (/|/data|/root) ' /proc/mounts");
  std::printf("guest mounts:\n%s", mounts.c_str());
  IoResult in_vol = measure(guest, "/data", true, f);
  IoResult in_root = measure(guest, "/root", true, f);
  d.deleteSandbox(id);

  std::string host_dir = d.root() + "/host-fs";
  fs::create_directories(host_dir);
  HostPlace host;
  IoResult on_host = measure(host, host_dir, false, f);

  CreateResult creates = measureCreates(d, vol, f.creates);
  printTable(f, in_vol, in_root, on_host, creates);
  writeResults("volume",
               {{"runs", 1},
                {"accel", "tcg"},
                {"cpus", ::sysconf(_SC_NPROCESSORS_ONLN)},
                {"seq_mib", f.seq_mib},
                {"files", f.files},
                {"guest_mounts", mounts},
                {"volume", js(in_vol)},
                {"root_disk", js(in_root)},
                {"host_fs", js(on_host)},
                {"create_ms", json::object{{"no_volume", toJson(creates.plain)},
                                           {"one_volume", toJson(creates.mounted)},
                                           {"added_p50", creates.mounted.p50 - creates.plain.p50},
                                           {"error", creates.why}}}});
  bool ok = in_vol.why.empty() && in_root.why.empty() && on_host.why.empty() && creates.why.empty();
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace vessel::bench

int main(int argc, char** argv) {
  vessel::bench::Flags f;
  if (!vessel::bench::parseFlags(argc, argv, f)) return 2;
  return vessel::bench::run(f);
}
