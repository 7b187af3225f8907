#pragma once
// A small Prometheus metrics registry: counters, gauges and histograms in
// labelled families, rendered in the text exposition format (0.0.4) that
// `GET /metrics` serves. Debian 12 ships no prometheus-cpp, and what a
// daemon here needs is this much.
//
// Families and their children live as long as the Registry; references
// handed out stay valid. Updating a value is lock-free (atomics) except a
// histogram observation, which takes its own small lock; creating a child
// takes the family's lock, so hot paths keep the reference they got once.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace vessel::metrics {

// Label values in the order of the family's label names.
using Labels = std::vector<std::string>;

class Counter {
 public:
  void inc(double v = 1) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void inc(double v = 1) { value_.fetch_add(v, std::memory_order_relaxed); }
  void dec(double v = 1) { value_.fetch_sub(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // `bounds`: upper bounds, increasing; +Inf is implicit.
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // GUARDED_BY(mu_), per bucket (not cumulative)
  double sum_ = 0;                // GUARDED_BY(mu_)
};

// Bucket bounds for latencies in seconds, 5 ms to 5 min.
std::vector<double> latencyBuckets();

template <class M>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::function<std::unique_ptr<M>()> make)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        make_(std::move(make)) {}
  // The child with these label values (created on first use). Label values
  // beyond the family's names are ignored, missing ones are empty.
  M& with(Labels values) {
    values.resize(label_names_.size());
    std::lock_guard<std::mutex> l(mu_);
    auto& slot = children_[values];
    if (!slot) slot = make_();
    return *slot;
  }
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& labelNames() const { return label_names_; }
  // Calls f(labels, metric) for every child, in label order.
  template <class F>
  void forEach(F&& f) const {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [labels, m] : children_) f(labels, *m);
  }

 private:
  std::string name_, help_;
  std::vector<std::string> label_names_;
  std::function<std::unique_ptr<M>()> make_;
  mutable std::mutex mu_;
  std::map<Labels, std::unique_ptr<M>> children_;  // GUARDED_BY(mu_)
};

// Writes samples for a collector: values computed at scrape time (e.g.
// sandboxes by state, read from the store).
class SampleWriter {
 public:
  // One family header; then any number of samples for it.
  void family(const std::string& name, const std::string& help, const std::string& type);
  void sample(const std::string& name, const std::vector<std::string>& label_names,
              const Labels& values, double v);
  std::string& text() { return out_; }

 private:
  std::string out_;
};

class Registry {
 public:
  // Registering a name twice returns the first family (same type) so that
  // two components may share one; names must match [a-zA-Z_:][a-zA-Z0-9_:]*.
  Family<Counter>& counter(const std::string& name, const std::string& help,
                           std::vector<std::string> label_names = {});
  Family<Gauge>& gauge(const std::string& name, const std::string& help,
                       std::vector<std::string> label_names = {});
  Family<Histogram>& histogram(const std::string& name, const std::string& help,
                               std::vector<std::string> label_names,
                               std::vector<double> bounds = latencyBuckets());
  // Runs at every render(), after the stored families, on the rendering thread.
  void addCollector(std::function<void(SampleWriter&)> c);
  // The whole registry in the Prometheus text format.
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Family<Counter>>> counters_;      // GUARDED_BY(mu_)
  std::map<std::string, std::unique_ptr<Family<Gauge>>> gauges_;          // GUARDED_BY(mu_)
  std::map<std::string, std::unique_ptr<Family<Histogram>>> histograms_;  // GUARDED_BY(mu_)
  std::vector<std::function<void(SampleWriter&)>> collectors_;            // GUARDED_BY(mu_)
};

// The Content-Type of render()'s output.
inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace vessel::metrics
