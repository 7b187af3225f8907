#include "metrics/registry.h"

#include <cmath>
#include <cstdio>

namespace vessel::metrics {

namespace {

std::string formatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Label values may hold anything: \, " and newline are escaped.
void appendEscaped(std::string& out, const std::string& v) {
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out.push_back(c);
  }
}

void appendLabels(std::string& out, const std::vector<std::string>& names, const Labels& values,
                  const char* extra_name = nullptr, const std::string& extra_value = "") {
  if (names.empty() && !extra_name) return;
  out.push_back('{');
  bool first = true;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!first) out.push_back(',');
    first = false;
    out += names[i] + "=\"";
    appendEscaped(out, i < values.size() ? values[i] : std::string());
    out.push_back('"');
  }
  if (extra_name) {
    if (!first) out.push_back(',');
    out += std::string(extra_name) + "=\"" + extra_value + "\"";
  }
  out.push_back('}');
}

std::string escapeHelp(const std::string& h) {
  std::string out;
  for (char c : h) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out.push_back(c);
  }
  return out;
}

}  // namespace

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> l(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard<std::mutex> l(mu_);
  Snapshot s;
  s.bounds = bounds_;
  uint64_t acc = 0;
  for (uint64_t c : counts_) {
    acc += c;
    s.cumulative.push_back(acc);
  }
  s.count = acc;
  s.sum = sum_;
  return s;
}

std::vector<double> latencyBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

void SampleWriter::family(const std::string& name, const std::string& help,
                          const std::string& type) {
  out_ += "# HELP " + name + " " + escapeHelp(help) + "\n";
  out_ += "# TYPE " + name + " " + type + "\n";
}

void SampleWriter::sample(const std::string& name, const std::vector<std::string>& label_names,
                          const Labels& values, double v) {
  out_ += name;
  appendLabels(out_, label_names, values);
  out_ += " " + formatValue(v) + "\n";
}

Family<Counter>& Registry::counter(const std::string& name, const std::string& help,
                                   std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> l(mu_);
  auto& f = counters_[name];
  if (!f)
    f = std::make_unique<Family<Counter>>(name, help, std::move(label_names),
                                          [] { return std::make_unique<Counter>(); });
  return *f;
}

Family<Gauge>& Registry::gauge(const std::string& name, const std::string& help,
                               std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> l(mu_);
  auto& f = gauges_[name];
  if (!f)
    f = std::make_unique<Family<Gauge>>(name, help, std::move(label_names),
                                        [] { return std::make_unique<Gauge>(); });
  return *f;
}

Family<Histogram>& Registry::histogram(const std::string& name, const std::string& help,
                                       std::vector<std::string> label_names,
                                       std::vector<double> bounds) {
  std::lock_guard<std::mutex> l(mu_);
  auto& f = histograms_[name];
  if (!f)
    f = std::make_unique<Family<Histogram>>(name, help, std::move(label_names), [bounds] {
      return std::make_unique<Histogram>(bounds);
    });
  return *f;
}

void Registry::addCollector(std::function<void(SampleWriter&)> c) {
  std::lock_guard<std::mutex> l(mu_);
  collectors_.push_back(std::move(c));
}

std::string Registry::render() const {
  std::vector<std::function<void(SampleWriter&)>> collectors;
  SampleWriter w;
  {
    std::lock_guard<std::mutex> l(mu_);
    // Names taken from each entry, not structured bindings (the lambdas below
    // capture them): see CONTRIBUTING.md "Coroutines under g++ 12" rule 4.
    for (const auto& entry : counters_) {
      const std::string& name = entry.first;
      const auto& f = entry.second;
      w.family(name, f->help(), "counter");
      f->forEach([&](const Labels& ls, const Counter& c) {
        w.sample(name, f->labelNames(), ls, c.value());
      });
    }
    for (const auto& entry : gauges_) {
      const std::string& name = entry.first;
      const auto& f = entry.second;
      w.family(name, f->help(), "gauge");
      f->forEach([&](const Labels& ls, const Gauge& g) {
        w.sample(name, f->labelNames(), ls, g.value());
      });
    }
    for (const auto& entry : histograms_) {
      const std::string& name = entry.first;
      const auto& f = entry.second;
      w.family(name, f->help(), "histogram");
      f->forEach([&](const Labels& ls, const Histogram& h) {
        auto s = h.snapshot();
        std::string& out = w.text();
        for (size_t i = 0; i <= s.bounds.size(); ++i) {
          out += name + "_bucket";
          appendLabels(out, f->labelNames(), ls, "le",
                       i < s.bounds.size() ? formatValue(s.bounds[i]) : "+Inf");
          out += " " + std::to_string(s.cumulative[i]) + "\n";
        }
        w.sample(name + "_sum", f->labelNames(), ls, s.sum);
        w.sample(name + "_count", f->labelNames(), ls, static_cast<double>(s.count));
      });
    }
    collectors = collectors_;
  }
  // Outside the lock: a collector may take its own (or query a store).
  for (const auto& c : collectors) c(w);
  return std::move(w.text());
}

}  // namespace vessel::metrics
