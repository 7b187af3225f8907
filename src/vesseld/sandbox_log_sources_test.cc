// The sandbox log's sources in vesseld (issue 28, docs/logs.md), each into
// a real store: the guest's console (ConsoleTail: lines, their bounds, what
// is read once), the gateway's decisions (EgressLog::take: per sandbox,
// bounded, a restarted gateway) and the front ends' files and port
// connections (the command log's observer: never the data), and the
// template's start command's output (StartOutput: lines per stream, across
// a pause, bounded, its exit).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>

#include "vesseld/command_log.h"
#include "vesseld/console_tail.h"
#include "vesseld/egress_log.h"
#include "vesseld/start_output.h"

namespace vessel::vesseld {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using ::testing::ElementsAre;

class LogSourcesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/log-sources-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto s = store::openSqlite(dir_ + "/vessel.db", &clock_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    ASSERT_TRUE(store_->createTenant("t", "T").ok());
    for (const char* id : {"sb-1", "sb-2"}) {
      store::SandboxRecord r;
      r.id = id;
      r.tenant_id = "t";
      r.template_name = "minimal";
      ASSERT_TRUE(store_->insertSandbox(r).ok());
    }
    log_ = std::make_unique<ops::SandboxLog>(*store_, clock_);
    log_->setLimits({100000, std::chrono::seconds(3600)});
  }
  void TearDown() override {
    log_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  std::vector<json::object> entries(const std::string& id, std::string_view kind) {
    store::LogQuery q;
    q.kind = kind;
    q.limit = 100000;
    auto r = store_->listLogs("t", id, q);
    EXPECT_TRUE(r.ok());
    std::vector<json::object> out;
    if (r.ok())
      for (const auto& e : *r) out.push_back(json::parse(e.data_json).as_object());
    return out;
  }
  std::vector<std::string> lines(const std::string& id) {
    std::vector<std::string> out;
    for (const auto& o : entries(id, ops::kLogConsole)) out.emplace_back(o.at("line").as_string());
    return out;
  }
  void append(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::app | std::ios::binary) << bytes;
  }

  std::string dir_;
  FakeWallClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ops::SandboxLog> log_;
};

TEST_F(LogSourcesTest, TheConsoleIsReadOnceALineAnEntryPrintable) {
  ConsoleTail tail(log_->handle());
  std::string path = dir_ + "/console.log";
  tail.poll("sb-1", path);  // no file yet: nothing, no error
  append(path, "Linux version 6.1\r\n\x1b[32mOK\x1b[0m\tagent up\n\x07\nhalf");
  tail.poll("sb-1", path);
  EXPECT_THAT(lines("sb-1"), ElementsAre("Linux version 6.1", "OK agent up"));
  tail.poll("sb-1", path);  // nothing new
  append(path, " a line\n");
  tail.poll("sb-1", path);
  EXPECT_THAT(lines("sb-1"), ElementsAre("Linux version 6.1", "OK agent up", "half a line"));
  // Cut at the bound, and said so.
  append(path, std::string(3000, 'x') + "\n");
  tail.poll("sb-1", path);
  auto all = entries("sb-1", ops::kLogConsole);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all.back().at("line").as_string().size(), kMaxConsoleLineBytes);
  EXPECT_TRUE(all.back().contains("truncated"));
  // Not valid UTF-8: made so (JSON is UTF-8).
  append(path, "bad \xff byte\nlast words");
  tail.poll("sb-1", path, /*last=*/true);
  auto l = lines("sb-1");
  ASSERT_EQ(l.size(), 6u);
  EXPECT_EQ(l[4], "bad \xEF\xBF\xBD byte");
  EXPECT_EQ(l[5], "last words");  // the VM stops: its unended line too
  EXPECT_TRUE(entries("sb-2", ops::kLogConsole).empty());
}

TEST_F(LogSourcesTest, AVmGivesAtMostItsBoundOfLinesAndANewVmStartsAgain) {
  ConsoleTail tail(log_->handle());
  std::string path = dir_ + "/console.log";
  std::string many;
  for (int i = 0; i < kMaxConsoleLines + 50; ++i) many += "line " + std::to_string(i) + "\n";
  append(path, many);
  for (int i = 0; i < 10; ++i) tail.poll("sb-1", path);
  auto l = lines("sb-1");
  ASSERT_EQ(l.size(), static_cast<size_t>(kMaxConsoleLines) + 1);
  EXPECT_THAT(l.back(), ::testing::HasSubstr("are not logged"));
  // A resume's VM writes its console.log from the start.
  fs::remove(path);
  tail.restart("sb-1");
  append(path, "resumed\n");
  tail.poll("sb-1", path);
  EXPECT_EQ(lines("sb-1").back(), "resumed");
  // A VM taken over after a restart: what it wrote before is not new.
  tail.skipTo("sb-2", path);
  append(path, "after the restart\n");
  tail.poll("sb-2", path);
  EXPECT_THAT(lines("sb-2"), ElementsAre("after the restart"));
}

TEST_F(LogSourcesTest, TheGatewaysDecisionsGoToTheirSandboxesBounded) {
  json::array d;
  d.push_back({{"seq", 1},
               {"at_ms", 1},
               {"kind", "dns"},
               {"sandbox", "sb-1"},
               {"name", "denied.test"},
               {"address", ""},
               {"port", 1},
               {"verdict", "deny"},
               {"reason", "not-allowed"}});
  d.push_back({{"seq", 2},
               {"at_ms", 2},
               {"kind", "tcp"},
               {"sandbox", "?10.0.0.9"},
               {"name", ""},
               {"address", ""},
               {"port", 80},
               {"verdict", "deny"},
               {"reason", "unknown-source"}});
  for (int i = 0; i < kMaxEgressPerRead + 5; ++i)
    d.push_back({{"seq", 3 + i},
                 {"at_ms", 3},
                 {"kind", "tcp"},
                 {"sandbox", "sb-2"},
                 {"name", "a.test"},
                 {"address", "192.0.2.1"},
                 {"port", 443},
                 {"verdict", "allow"},
                 {"reason", "allowed"}});
  uint64_t last = 2 + kMaxEgressPerRead + 5;
  json::object reply{{"decisions", d}, {"last", last}};
  EXPECT_EQ(EgressLog::take(reply, 0, *log_), last);
  auto one = entries("sb-1", ops::kLogEgress);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].at("flow").as_string(), "dns");
  EXPECT_EQ(one[0].at("name").as_string(), "denied.test");
  EXPECT_EQ(one[0].at("qtype").as_int64(), 1);
  EXPECT_EQ(one[0].at("verdict").as_string(), "deny");
  auto two = entries("sb-2", ops::kLogEgress);
  ASSERT_EQ(two.size(), static_cast<size_t>(kMaxEgressPerRead) + 1);
  EXPECT_EQ(two.back().at("skipped").as_int64(), 5);
  EXPECT_EQ(two[0].at("port").as_int64(), 443);
  EXPECT_EQ(two[0].at("address").as_string(), "192.0.2.1");
  // A gateway started again numbers from 1: read again from its start.
  EXPECT_EQ(EgressLog::take(json::object{{"decisions", json::array()}, {"last", 3}}, last, *log_),
            0u);
}

TEST_F(LogSourcesTest, FilesAndPortConnectionsThroughTheCommandObserver) {
  auto obs = commandLog(*log_, "sb-1");
  obs->file({.origin = "ses-0123456789ab", .op = "write", .path = "/tmp/a.txt", .size = 12});
  obs->file({.origin = "envd", .op = "rename", .path = "/tmp/a.txt", .to = "/tmp/b.txt"});
  obs->file({.origin = "envd", .op = "remove", .path = "/" + std::string(10000, 'p')});
  agentclient::PortNote p;
  p.origin = "ingress";
  p.peer = "198.51.100.7";
  p.port = 8080;
  p.bytes_in = 10;
  p.bytes_out = 20;
  p.started = std::chrono::steady_clock::now();
  obs->port(p);
  auto files = entries("sb-1", ops::kLogFile);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(json::serialize(files[0]),
            R"({"who":"ses-0123456789ab","op":"write","path":"/tmp/a.txt","size":12})");
  EXPECT_EQ(files[1].at("to").as_string(), "/tmp/b.txt");
  EXPECT_FALSE(files[1].contains("size"));
  EXPECT_LE(files[2].at("path").as_string().size(), kMaxLoggedCommandBytes + 3);
  auto ports = entries("sb-1", ops::kLogPort);
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_EQ(ports[0].at("port").as_int64(), 8080);
  EXPECT_EQ(ports[0].at("peer").as_string(), "198.51.100.7");
  EXPECT_EQ(ports[0].at("bytes_in").as_int64(), 10);
  EXPECT_EQ(ports[0].at("bytes_out").as_int64(), 20);
  EXPECT_TRUE(ports[0].contains("duration_ms"));
  // Gone with the log: the observer writes nothing, and does not crash.
  log_.reset();
  obs->file({.origin = "envd", .op = "remove", .path = "/x"});
}

TEST_F(LogSourcesTest, TheStartCommandsOutputALineAnEntryPerStreamThenItsExit) {
  StartOutput out(log_->handle());
  auto shown = [&](const std::string& id) {
    std::vector<std::string> l;
    for (const auto& o : entries(id, ops::kLogStart))
      l.push_back(o.contains("line") ? std::string(o.at("stream").as_string()) + ":" +
                                           std::string(o.at("line").as_string())
                  : o.contains("lost_bytes") ? "lost " + json::serialize(o.at("lost_bytes"))
                                             : "exit " + json::serialize(o.at("exit_code")));
    return l;
  };
  out.lost("sb-1", 9, 0);  // nothing lost: no entry
  EXPECT_TRUE(out.output("sb-1", 9, false, "listening on :8000\nhal"));
  EXPECT_TRUE(out.output("sb-1", 9, true, "\x1b[31mwarn\x1b[0m\r\n"));
  // A pause between: the partial line waits for the next VM's output.
  EXPECT_TRUE(out.output("sb-1", 9, false, "f a line\n"));
  out.lost("sb-1", 9, 4096);
  EXPECT_TRUE(out.output("sb-1", 9, false, "no newline at the end"));
  out.exited("sb-1", 9, agentclient::ExitInfo{true, 3, 0, false});
  EXPECT_THAT(shown("sb-1"),
              ElementsAre("stdout:listening on :8000", "stderr:warn", "stdout:half a line",
                          "lost 4096", "stdout:no newline at the end", "exit 3"));
  auto all = entries("sb-1", ops::kLogStart);
  EXPECT_EQ(all.front().at("pid").as_int64(), 9);
  // Its messages, and a non-zero exit is an error.
  EXPECT_EQ(ops::logMessage(ops::kLogStart, all[1]), "stderr: warn");
  EXPECT_EQ(ops::logMessage(ops::kLogStart, all.back()), "start command (pid 9) exited 3");
  EXPECT_TRUE(ops::logIsError(ops::kLogStart, all.back()));
  EXPECT_FALSE(ops::logIsError(ops::kLogStart, all.front()));
  EXPECT_TRUE(entries("sb-2", ops::kLogStart).empty());

  // A long line is cut; past the bound, one entry says so and output()
  // answers false (the follower detaches); nothing more is written.
  EXPECT_TRUE(out.output("sb-2", 5, false, std::string(5000, 'y') + "\n"));
  auto cut = entries("sb-2", ops::kLogStart);
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0].at("line").as_string().size(), kMaxStartLineBytes);
  EXPECT_TRUE(cut[0].contains("truncated"));
  std::string many;
  for (int i = 0; i < kMaxStartLines + 20; ++i) many += "l" + std::to_string(i) + "\n";
  EXPECT_FALSE(out.output("sb-2", 5, false, many));
  EXPECT_FALSE(out.output("sb-2", 5, true, "more\n"));
  auto capped = entries("sb-2", ops::kLogStart);
  ASSERT_EQ(capped.size(), static_cast<size_t>(kMaxStartLines) + 1);
  EXPECT_THAT(std::string(capped.back().at("line").as_string()),
              ::testing::HasSubstr("attaches to pid 5"));
  // Deleted: a later sandbox of that id would start again.
  out.forget("sb-2");
  EXPECT_TRUE(out.output("sb-2", 5, false, "again\n"));
}

}  // namespace
}  // namespace vessel::vesseld
