// The sandbox log as the lifecycle writes it (ops/sandbox_log.h), on the
// fake node: each change of a sandbox an entry of its log with the facts
// behind it, the bound per sandbox, the retention after it ends, tenant
// scoping and the followers' wake-ups.
#include <boost/json.hpp>

#include "ops/testing/lifecycle_fixture.h"

namespace vessel::ops {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using LifecycleTest = testing::LifecycleTest;

class SandboxLogTest : public LifecycleTest {
 protected:
  std::vector<store::LogRecord> entries(const std::string& id, store::LogQuery q = {}) {
    auto r = lc_->readLog("t1", id, q);
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? *r : std::vector<store::LogRecord>{};
  }
  // The lifecycle entries' events, in order.
  std::vector<std::string> events(const std::string& id) {
    std::vector<std::string> out;
    store::LogQuery q;
    q.kind = "lifecycle";
    for (const auto& e : entries(id, q))
      out.push_back(std::string(json::parse(e.data_json).at("event").as_string()));
    return out;
  }
  json::object data(const store::LogRecord& r) { return json::parse(r.data_json).as_object(); }
};

TEST_F(SandboxLogTest, EveryChangeOfASandboxIsAnEntry) {
  std::string id = created();
  ASSERT_TRUE(lc_->pause("t1", id).ok());
  drain();
  ASSERT_TRUE(lc_->resume("t1", id).ok());
  drain();
  auto f = lc_->fork("t1", id, 1);
  ASSERT_TRUE(f.ok()) << f.error().message();
  drain();
  ASSERT_EQ(f->copies.size(), 1u);
  std::string copy = f->copies[0].id;
  ASSERT_TRUE(lc_->remove("t1", id).ok());
  drain();
  EXPECT_THAT(events(id),
              ElementsAre("created", "running", "pausing", "paused", "resuming", "running",
                          "forked", "forking", "running", "deleting", "deleted"));
  auto all = entries(id);
  ASSERT_FALSE(all.empty());
  auto first = data(all.front());
  EXPECT_EQ(first.at("template").as_string(), "minimal");
  EXPECT_EQ(first.at("from").as_string(), "snapshot");
  EXPECT_TRUE(first.contains("operation"));
  // The copy says where it came from; the parent which copies it made.
  auto copy_log = entries(copy);
  ASSERT_FALSE(copy_log.empty());
  EXPECT_EQ(data(copy_log.front()).at("forked_from").as_string(), id);
  EXPECT_EQ(data(copy_log.front()).at("from").as_string(), "fork");
  bool named = false;
  for (const auto& e : all)
    if (data(e).at("event") == "forked")
      named = data(e).at("copies").as_array().size() == 1 &&
              data(e).at("copies").as_array()[0].as_string() == copy;
  EXPECT_TRUE(named);
  // Kept after the delete, for the tenant only.
  EXPECT_EQ(lc_->readLog("t2", id, {}).error().code(), Code::kNotFound);
  EXPECT_EQ(lc_->readLog("t1", "sb-nonesuch", {}).error().code(), Code::kNotFound);
}

TEST_F(SandboxLogTest, AFailureSaysWhy) {
  std::string id = created();
  node_->lose(id, "its VM exited with status 137");
  drain();
  auto all = entries(id);
  ASSERT_FALSE(all.empty());
  auto last = data(all.back());
  EXPECT_EQ(last.at("event").as_string(), "failed");
  EXPECT_THAT(std::string(last.at("error").as_string()), HasSubstr("status 137"));
}

// Each kind as a person reads it (`vessel logs`, E2B's message): what
// happened, never more than its entry holds.
TEST(SandboxLogMessageTest, EachKindReadsAsALine) {
  EXPECT_EQ(logMessage(kLogConsole, json::object{{"line", "[    0.1] virtio: ok"}}),
            "[    0.1] virtio: ok");
  EXPECT_EQ(logMessage(kLogFile,
                       json::object{
                           {"who", "envd"}, {"op", "write"}, {"path", "/tmp/a.txt"}, {"size", 12}}),
            "write /tmp/a.txt (12 bytes) (envd)");
  EXPECT_EQ(
      logMessage(kLogFile,
                 json::object{
                     {"who", "ses-0123456789ab"}, {"op", "rename"}, {"path", "/a"}, {"to", "/b"}}),
      "rename /a to /b (ses-0123456789ab)");
  EXPECT_EQ(logMessage(kLogPort, json::object{{"who", "ingress"},
                                              {"port", 8080},
                                              {"peer", "127.0.0.1"},
                                              {"bytes_in", 80},
                                              {"bytes_out", 200},
                                              {"duration_ms", 3}}),
            "port 8080 from 127.0.0.1: 80 bytes in, 200 out, 3 ms (ingress)");
  EXPECT_EQ(logMessage(kLogEgress, json::object{{"flow", "tcp"},
                                                {"name", "example.com"},
                                                {"port", 443},
                                                {"verdict", "deny"},
                                                {"reason", "not-allowed"}}),
            "tcp example.com:443 deny (not-allowed)");
  EXPECT_EQ(logMessage(kLogEgress, json::object{{"flow", "dns"},
                                                {"name", "x.test"},
                                                {"qtype", 1},
                                                {"verdict", "deny"},
                                                {"reason", "not-allowed"}}),
            "dns x.test (type 1) deny (not-allowed)");
  EXPECT_EQ(logMessage(kLogEgress, json::object{{"skipped", 7}}), "7 more decisions not logged");
  for (std::string_view k :
       {kLogLifecycle, kLogCommand, kLogConsole, kLogFile, kLogPort, kLogEgress})
    EXPECT_TRUE(knownLogKind(k)) << k;
  EXPECT_FALSE(knownLogKind("stdout"));
}

TEST_F(SandboxLogTest, EachSandboxKeepsItsNewestEntries) {
  Policy p = lc_->policy();
  p.log_max_entries = 5;
  lc_->setPolicy(p);
  std::string id = created();
  std::string other = created();
  for (int i = 0; i < 100; ++i) lc_->sandboxLog().append(id, kLogCommand, {{"i", i}});
  auto all = entries(id);
  EXPECT_LE(all.size(), size_t{5 + SandboxLog::kTrimEvery - 1});
  EXPECT_GE(all.size(), 5u);
  EXPECT_EQ(data(all.back()).at("i").as_int64(), 99);  // the newest stay
  EXPECT_EQ(events(other), (std::vector<std::string>{"created", "running"}));
  // Its end trims it to the bound exactly.
  ASSERT_TRUE(lc_->remove("t1", id).ok());
  drain();
  all = entries(id);
  EXPECT_EQ(all.size(), 5u);
  EXPECT_EQ(data(all.back()).at("event").as_string(), "deleted");
}

TEST_F(SandboxLogTest, KeptForTheRetentionAfterTheEndThenCollectedByTheReaper) {
  Policy p = lc_->policy();
  p.log_retention_s = 3600;
  lc_->setPolicy(p);
  std::string gone = created();
  CreateRequest never_idle;
  never_idle.timeout_s = 0;  // the clock jumps an hour: the reaper must not end it
  std::string live = created(never_idle);
  ASSERT_TRUE(lc_->remove("t1", gone).ok());
  drain();
  clock_.advance(3599s);
  lc_->reaper().reapOnce();
  EXPECT_FALSE(entries(gone).empty());
  clock_.advance(2s);
  lc_->reaper().reapOnce();  // under a minute since the last pass: not yet
  EXPECT_FALSE(entries(gone).empty());
  clock_.advance(60s);
  lc_->reaper().reapOnce();
  EXPECT_TRUE(entries(gone).empty());
  EXPECT_FALSE(entries(live).empty());
}

TEST_F(SandboxLogTest, FollowersWakeOnTheirSandboxsEntries) {
  std::string id = created();
  std::string other = created();
  auto sub = lc_->sandboxLog().subscribe(id, io_.get_executor());
  auto quiet = lc_->sandboxLog().subscribe(other, io_.get_executor());
  lc_->sandboxLog().append(id, kLogCommand, {{"phase", "start"}});
  auto woke = run(sub->wait(std::chrono::steady_clock::now() + 10s));
  EXPECT_TRUE(woke);
  auto slept = run(quiet->wait(std::chrono::steady_clock::now() + 10ms));
  EXPECT_FALSE(slept);
}

}  // namespace
}  // namespace vessel::ops
