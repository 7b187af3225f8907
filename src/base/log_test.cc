#include "base/log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <boost/json.hpp>
#include <sstream>

namespace vessel {
namespace {

namespace json = boost::json;

// vesseld --log-format: both formats through a logger writing to a string.
class LogFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = spdlog::default_logger();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  }
  void TearDown() override {
    initLogging("info", LogFormat::kText);
    spdlog::set_default_logger(previous_);
  }
  std::vector<std::string> lines() {
    std::vector<std::string> v;
    std::istringstream in(out_.str());
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  }
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST_F(LogFormatTest, JsonIsOneObjectPerLine) {
  initLogging("info", LogFormat::kJson);
  Logger("ops", "sb-1").warn("a \"quoted\" {} with\na newline\t\x01", "word");
  Logger("http").infoWith("request", {{"request_id", "req-1"}, {"status", "200"}});
  Logger("ops").debug("below the level: {}", 1);
  auto l = lines();
  ASSERT_EQ(l.size(), 2u) << out_.str();
  auto first = json::parse(l[0]).as_object();
  EXPECT_EQ(first.at("level").as_string(), "warning");
  EXPECT_EQ(first.at("component").as_string(), "ops");
  EXPECT_EQ(first.at("sandbox").as_string(), "sb-1");
  EXPECT_EQ(first.at("message").as_string(), "a \"quoted\" word with\na newline\t\x01");
  EXPECT_EQ(first.at("time").as_string().size(), 24u);  // 2026-12-02T05:00:00.123Z
  auto second = json::parse(l[1]).as_object();
  EXPECT_FALSE(second.contains("sandbox"));  // none known
  EXPECT_EQ(second.at("request_id").as_string(), "req-1");
  EXPECT_EQ(second.at("status").as_string(), "200");
}

TEST_F(LogFormatTest, TextKeepsItsShapeWithFieldsAtTheEnd) {
  initLogging("info", LogFormat::kText);
  Logger("http").infoWith("request", {{"route", "/v1/x"}, {"status", "404"}});
  auto l = lines();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_NE(l[0].find(" info http - request route=/v1/x status=404"), std::string::npos) << l[0];
}

TEST(JsonEscapeTest, EscapesWhatJsonNeeds) {
  EXPECT_EQ(jsonEscape("a\"b\\c\n\r\t\x1f"), "a\\\"b\\\\c\\n\\r\\t\\u001f");
  EXPECT_EQ(jsonEscape("plain ü"), "plain ü");
}

}  // namespace
}  // namespace vessel
