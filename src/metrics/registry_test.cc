#include "metrics/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vessel::metrics {
namespace {

using ::testing::HasSubstr;

TEST(Registry, RendersCountersGaugesAndHistogramsInTextFormat) {
  Registry r;
  auto& req = r.counter("vessel_http_requests_total", "HTTP requests", {"method", "status"});
  req.with({"GET", "200"}).inc();
  req.with({"GET", "200"}).inc(2);
  req.with({"POST", "404"}).inc();
  r.gauge("vessel_up", "1 when serving").with({}).set(1);
  auto& lat = r.histogram("vessel_op_seconds", "latency", {"kind"}, {0.1, 1});
  lat.with({"create"}).observe(0.05);
  lat.with({"create"}).observe(0.5);
  lat.with({"create"}).observe(7);

  std::string out = r.render();
  EXPECT_THAT(out, HasSubstr("# HELP vessel_http_requests_total HTTP requests\n"
                             "# TYPE vessel_http_requests_total counter\n"));
  EXPECT_THAT(out, HasSubstr("vessel_http_requests_total{method=\"GET\",status=\"200\"} 3\n"));
  EXPECT_THAT(out, HasSubstr("vessel_http_requests_total{method=\"POST\",status=\"404\"} 1\n"));
  EXPECT_THAT(out, HasSubstr("# TYPE vessel_up gauge\nvessel_up 1\n"));
  EXPECT_THAT(out, HasSubstr("vessel_op_seconds_bucket{kind=\"create\",le=\"0.1\"} 1\n"));
  EXPECT_THAT(out, HasSubstr("vessel_op_seconds_bucket{kind=\"create\",le=\"1\"} 2\n"));
  EXPECT_THAT(out, HasSubstr("vessel_op_seconds_bucket{kind=\"create\",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(out, HasSubstr("vessel_op_seconds_sum{kind=\"create\"} 7.55\n"));
  EXPECT_THAT(out, HasSubstr("vessel_op_seconds_count{kind=\"create\"} 3\n"));
}

TEST(Registry, EscapesLabelValuesAndSharesFamiliesByName) {
  Registry r;
  auto& a = r.counter("x_total", "x", {"v"});
  auto& b = r.counter("x_total", "other help is ignored", {"v"});
  EXPECT_EQ(&a, &b);
  a.with({"a\"b\\c\nd"}).inc();
  EXPECT_THAT(r.render(), HasSubstr("x_total{v=\"a\\\"b\\\\c\\nd\"} 1\n"));
}

TEST(Registry, CollectorsAddScrapeTimeSamples) {
  Registry r;
  int calls = 0;
  r.addCollector([&](SampleWriter& w) {
    ++calls;
    w.family("vessel_sandboxes", "by state", "gauge");
    w.sample("vessel_sandboxes", {"state"}, {"running"}, 2);
  });
  std::string out = r.render();
  EXPECT_EQ(calls, 1);
  EXPECT_THAT(out,
              HasSubstr("# TYPE vessel_sandboxes gauge\nvessel_sandboxes{state=\"running\"} 2\n"));
}

}  // namespace
}  // namespace vessel::metrics
