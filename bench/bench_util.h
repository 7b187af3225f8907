#pragma once
// Shared by the benchmarks: percentiles, a printed table, a JSON file in
// bench/results/ (VESSEL_BENCH_RESULTS), and the guest artifacts' paths.
#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace vessel::bench {

// Milliseconds since `t` on the steady clock.
inline double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

struct Stats {
  size_t n = 0;
  double min = 0, p50 = 0, p99 = 0, max = 0, mean = 0;
};

inline Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) {
    size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
  };
  s.n = v.size();
  s.min = v.front();
  s.max = v.back();
  s.p50 = pct(0.50);
  s.p99 = pct(0.99);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

inline boost::json::object toJson(const Stats& s) {
  return {{"n", s.n},     {"min", s.min}, {"p50", s.p50},
          {"p99", s.p99}, {"max", s.max}, {"mean", s.mean}};
}

inline std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) {
    std::fprintf(stderr, "%s is not set; run benchmarks with `make bench`\n", name);
    std::exit(2);
  }
  return v;
}

inline void writeResults(const std::string& name, const boost::json::object& o) {
  const char* dir = std::getenv("VESSEL_BENCH_RESULTS");
  std::string base = dir && *dir ? dir : "bench/results";
  std::string path = base + "/" + name + ".json";
  // Run from anywhere (e.g. build/release by hand): make the directory, and
  // say so when the file could not be written rather than claim it was.
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  std::ofstream f(path);
  f << boost::json::serialize(o) << "\n";
  f.flush();
  if (!f) {
    std::fprintf(stderr, "results NOT written: cannot write %s\n", path.c_str());
    return;
  }
  std::printf("results written to %s\n", path.c_str());
}

}  // namespace vessel::bench
