// What envd keeps for a sandbox between requests (watchers and their queued
// events, process entries) against the real agent run on the host: capped
// per sandbox and per tenant, freed when the sandbox ends, kept for a
// bounded time while it is not running (a pause). Counted through
// Envd::usage(), never timed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>

#include "agentclient/testing/agent_harness.h"
#include "e2b/envd/connect.h"
#include "e2b/envd/envd.h"
#include "e2b/envd/gzip.h"
#include "e2b/envd/test_client.h"

namespace vessel::e2b::envd {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using agentclient::testing::runFor;
using ::testing::HasSubstr;

const std::string kRoot = "Authorization: Basic cm9vdDo=\r\n";  // "root:"

class EnvdStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto h = agentclient::testing::HostAgent::start(io_, VESSEL_AGENT_BINARY);
    ASSERT_TRUE(h.ok()) << h.error().message();
    agent_ = std::move(*h);
    dir_ = "/tmp/envd-state-test-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    server_.close();
    envd_.reset();
    std::filesystem::remove_all(dir_);
  }
  // Two sandboxes of one tenant, both served by the one host agent.
  void startEnvd(const EnvdLimits& limits) {
    Sandboxes sb;
    sb.agent_of = [this](const std::string& id) -> std::shared_ptr<agentclient::AgentClient> {
      return (id == "sb-1" || id == "sb-2") && running_ ? agent_->client() : nullptr;
    };
    sb.live_ids = [this] {
      return running_ ? std::vector<std::string>{"sb-1", "sb-2"} : std::vector<std::string>{};
    };
    sb.tenant_of = [](const std::string&) { return std::string("team-a"); };
    envd_ = std::make_unique<Envd>(io_, std::move(sb), tokens_, limits);
    envd_->install(server_);
    ASSERT_TRUE(server_.listen(HostPort{"127.0.0.1", 0}).ok());
  }
  std::string headers(const std::string& sandbox, const std::string& method,
                      const std::string& ctype) {
    return "POST " + method + " HTTP/1.1\r\nHost: 127.0.0.1\r\nE2b-Sandbox-Id: " + sandbox +
           "\r\nX-Access-Token: " + tokens_.forSandbox(sandbox) + "\r\nContent-Type: " + ctype +
           "\r\n" + kRoot;
  }
  Result<Reply> unary(const std::string& sandbox, const std::string& method,
                      const json::object& msg) {
    return runFor(
        io_,
        request(server_.port(), headers(sandbox, method, "application/json"), json::serialize(msg)),
        30s);
  }
  // A watcher's id, or the Connect code of the refusal.
  std::string createWatcher(const std::string& sandbox) {
    auto r = unary(sandbox, "/filesystem.Filesystem/CreateWatcher",
                   json::object{{"path", dir_}, {"recursive", false}});
    if (!r.ok()) return "error: " + r.error().message();
    auto v = json::parse(r->body).as_object();
    if (r->status != 200) return "code: " + std::string(v.at("code").as_string());
    return std::string(v.at("watcherId").as_string());
  }
  // Starts `cmd` and abandons its stream once it has its pid: the process
  // goes on, held in envd's table. Empty on a refusal (then `code` says why).
  std::optional<int64_t> startDetached(const std::string& sandbox, const std::string& cmd,
                                       std::string* code = nullptr) {
    auto go = [&]() -> asio::awaitable<Result<std::string>> {
      auto ex = co_await asio::this_coro::executor;
      asio::ip::tcp::socket s(ex);
      co_await s.async_connect({asio::ip::make_address("127.0.0.1"), server_.port()},
                               asio::as_tuple(asio::use_awaitable));
      json::array args{"-c", cmd};
      json::object msg{{"process", json::object{{"cmd", "/bin/sh"}, {"args", args}}}};
      std::string body = encodeEnvelope(0, json::serialize(msg));
      std::string req = headers(sandbox, "/process.Process/Start", "application/connect+json") +
                        "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
      co_await asio::async_write(s, asio::buffer(req), asio::as_tuple(asio::use_awaitable));
      std::string raw;
      char buf[4096];
      while (raw.find("\"pid\":") == std::string::npos &&
             raw.find("\"code\":") == std::string::npos) {
        auto [ec, n] =
            co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
        raw.append(buf, n);
        if (ec) break;
      }
      co_return raw;
    };
    auto raw = runFor(io_, go(), 20s);
    if (!raw.ok()) return std::nullopt;
    if (auto at = raw->find("\"pid\":"); at != std::string::npos)
      return static_cast<int64_t>(std::stol(raw->substr(at + 6)));
    if (code) *code = *raw;
    return std::nullopt;
  }
  // Runs the io context until `done` or 20 s; whether `done` came.
  bool runUntil(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + 20s;
    io_.restart();
    while (!done() && std::chrono::steady_clock::now() < deadline) io_.run_one_for(20ms);
    return done();
  }
  void runIoFor(std::chrono::milliseconds d) {
    auto until = std::chrono::steady_clock::now() + d;
    io_.restart();
    while (std::chrono::steady_clock::now() < until) io_.run_one_for(10ms);
  }

  asio::io_context io_;
  AccessTokens tokens_ = AccessTokens::withKey(std::string(32, 'k'));
  std::unique_ptr<agentclient::testing::HostAgent> agent_;
  std::unique_ptr<Envd> envd_;
  http::HttpServer server_{io_, http::ServerLimits{16 * 1024, 64 << 20, std::chrono::seconds(60)}};
  bool running_ = true;
  std::string dir_;
};

TEST_F(EnvdStateTest, WatcherQueuesAreCappedAndFreedWhenTheSandboxEnds) {
  EnvdLimits lim;
  lim.watchers_per_sandbox = 3;
  lim.watchers_per_tenant = 4;
  lim.watcher_bytes = 16 << 10;
  startEnvd(lim);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(createWatcher("sb-1"));
  for (auto& id : ids) ASSERT_EQ(id.rfind("w", 0), 0u) << id;
  EXPECT_EQ(createWatcher("sb-1"), "code: resource_exhausted") << "per sandbox";
  std::string other = createWatcher("sb-2");
  ASSERT_EQ(other.rfind("w", 0), 0u) << other;
  EXPECT_EQ(createWatcher("sb-2"), "code: resource_exhausted") << "per tenant";

  // Far more events than the caps hold: 4 watchers see each of 600 files
  // with long names made (~300 bytes queued per event).
  const int kFiles = 600;
  for (int i = 0; i < kFiles; ++i)
    std::ofstream(dir_ + "/" + std::string(200, 'f') + std::to_string(i)) << "x";
  // Until the queues hold near what the caps allow (uncapped, they would
  // grow to ~350 KiB each).
  ASSERT_TRUE(runUntil([&] {
    return envd_->usage().queued_bytes >= 4 * (lim.watcher_bytes - 1024);
  })) << envd_->usage().queued_bytes;
  // The newest are kept: the last file's events reach a poller.
  std::string polled;
  const std::string last = std::string(200, 'f') + std::to_string(kFiles - 1) + "\"";
  for (int i = 0; i < 200 && polled.find(last) == std::string::npos; ++i) {
    auto ev = unary("sb-1", "/filesystem.Filesystem/GetWatcherEvents",
                    json::object{{"watcherId", ids[0]}});
    ASSERT_TRUE(ev.ok());
    ASSERT_EQ(ev->status, 200) << ev->body;
    polled += ev->body;
  }
  EXPECT_THAT(polled, HasSubstr(last));
  auto u = envd_->usage();
  EXPECT_EQ(u.watchers, 4u);
  EXPECT_LE(u.queued_bytes, 4 * lim.watcher_bytes);
  EXPECT_LT(u.queued_events, 4u * kFiles) << "the oldest went";

  auto pid = startDetached("sb-1", "sleep 8");
  ASSERT_TRUE(pid.has_value());
  EXPECT_EQ(envd_->usage().processes, 1u);

  envd_->sandboxEnded("sb-1");
  u = envd_->usage();
  EXPECT_EQ(u.watchers, 1u) << "sb-2's stays";
  EXPECT_EQ(u.processes, 0u);
  EXPECT_LE(u.queued_bytes, lim.watcher_bytes);
  auto gone =
      unary("sb-1", "/filesystem.Filesystem/GetWatcherEvents", json::object{{"watcherId", ids[1]}});
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->status, 404) << gone->body;
  // Freed watchers leave room for new ones.
  EXPECT_EQ(createWatcher("sb-1").rfind("w", 0), 0u);

  envd_->sandboxEnded("sb-1");
  envd_->sandboxEnded("sb-2");
  u = envd_->usage();
  EXPECT_EQ(u.watchers, 0u);
  EXPECT_EQ(u.queued_events, 0u);
  EXPECT_EQ(u.queued_bytes, 0u);
  EXPECT_EQ(u.sandboxes, 0u);
}

TEST_F(EnvdStateTest, ProcessEntriesAreCappedPerSandboxAndPerTenant) {
  EnvdLimits lim;
  lim.processes_per_sandbox = 2;
  lim.processes_per_tenant = 3;
  startEnvd(lim);
  ASSERT_TRUE(startDetached("sb-1", "sleep 8").has_value());
  ASSERT_TRUE(startDetached("sb-1", "sleep 8").has_value());
  std::string code;
  EXPECT_FALSE(startDetached("sb-1", "sleep 8", &code).has_value());
  EXPECT_THAT(code, HasSubstr("resource_exhausted"));
  ASSERT_TRUE(startDetached("sb-2", "sleep 8").has_value());
  code.clear();
  EXPECT_FALSE(startDetached("sb-2", "sleep 8", &code).has_value());
  EXPECT_THAT(code, HasSubstr("resource_exhausted")) << "the tenant's cap";
  EXPECT_EQ(envd_->usage().processes, 3u);
  // An exited process's entry goes by itself.
  envd_->sandboxEnded("sb-2");
  ASSERT_TRUE(startDetached("sb-2", "true").has_value());
  EXPECT_TRUE(runUntil([&] { return envd_->usage().processes == 2; }));
  envd_->sandboxEnded("sb-1");
  EXPECT_EQ(envd_->usage().processes, 0u);
}

TEST_F(EnvdStateTest, ASandboxNotRunningKeepsItsStateForABoundedTime) {
  EnvdLimits lim;
  lim.keep_detached = 400ms;
  lim.sweep_interval = 20ms;
  startEnvd(lim);
  ASSERT_EQ(createWatcher("sb-1").rfind("w", 0), 0u);
  ASSERT_TRUE(startDetached("sb-1", "sleep 8").has_value());
  // Running: sweeps keep it.
  runIoFor(100ms);
  EXPECT_EQ(envd_->usage().watchers, 1u);
  EXPECT_EQ(envd_->usage().processes, 1u);
  // Paused (not among the running any more): kept, then freed.
  running_ = false;
  EXPECT_EQ(envd_->usage().watchers, 1u) << "not at once";
  EXPECT_TRUE(runUntil([&] {
    auto u = envd_->usage();
    return u.watchers == 0 && u.processes == 0 && u.sandboxes == 0;
  }));
}

// gzip of `mib` MiB of zeros (about a thousandth of that), made a MiB at a time.
std::string zerosGzip(size_t mib) {
  Gzip gz;
  std::string zeros(1 << 20, '\0'), out;
  for (size_t i = 0; i < mib; ++i) out += gz.feed(zeros, false);
  return out + gz.feed("", true);
}

// This process's peak resident set since the last reset (KiB).
size_t peakRssKib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoul(line.substr(6));
  return 0;
}
bool resetPeakRss() { return static_cast<bool>(std::ofstream("/proc/self/clear_refs") << "5"); }

TEST_F(EnvdStateTest, AnUploadBombIsStreamedWithinItsLimitOrRefused) {
  EnvdLimits lim;
  lim.max_inflated = 48u << 20;
  startEnvd(lim);
  const std::string fits = zerosGzip(40), bomb = zerosGzip(64);
  ASSERT_LT(bomb.size(), 1u << 20);
  auto upload = [&](const std::string& name, const std::string& body) {
    return runFor(
        io_,
        request(server_.port(),
                headers("sb-1", "/files?path=" + dir_ + "/" + name, "application/octet-stream") +
                    "Content-Encoding: gzip\r\n",
                body),
        120s);
  };
  // Streamed into the file: this process never holds what it inflates
  // (uncompressed whole, it would hold 40 MiB at least).
  ASSERT_TRUE(resetPeakRss());
  size_t before = peakRssKib();
  auto r = upload("fits.bin", fits);
  size_t peak = peakRssKib();
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/fits.bin"), 40u << 20);
  EXPECT_LT(peak - before, 16u << 10) << "KiB more at the peak while inflating 40 MiB";

  // Past the limit: refused, and the file it began is gone.
  auto b = upload("bomb.bin", bomb);
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(b->status, 507) << b->body;
  EXPECT_THAT(b->body, HasSubstr("inflates past the upload limit"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/bomb.bin"));

  // Not gzip at all: the caller's mistake.
  auto bad = upload("bad.bin", "this is not gzip");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400) << bad->body;
}

TEST_F(EnvdStateTest, OtherRequestsAreServedWhileUploadsInflate) {
  EnvdLimits lim;
  lim.inflating_uploads = 1;  // the second upload waits its turn
  startEnvd(lim);
  const std::string body = zerosGzip(32);
  auto run = [&]() -> asio::awaitable<Result<std::vector<int>>> {
    auto ex = co_await asio::this_coro::executor;
    std::vector<int> order;  // 1, 2: the uploads; 0: a Stat meanwhile
    int pending = 3;
    auto one = [&](std::string head, std::string b, int tag) -> asio::awaitable<void> {
      auto r = co_await request(server_.port(), std::move(head), std::move(b));
      order.push_back(r.ok() && r->status == 200 ? tag : -1);
      --pending;
    };
    for (int i = 1; i <= 2; ++i) {
      std::string head = headers("sb-1", "/files?path=" + dir_ + "/up" + std::to_string(i),
                                 "application/octet-stream") +
                         "Content-Encoding: gzip\r\n";
      asio::co_spawn(ex, one(std::move(head), body, i), asio::detached);
    }
    std::string stat_head = headers("sb-1", "/filesystem.Filesystem/Stat", "application/json");
    std::string stat_body = json::serialize(json::object{{"path", dir_}});
    asio::co_spawn(ex, one(std::move(stat_head), std::move(stat_body), 0), asio::detached);
    while (pending > 0) {
      asio::steady_timer t(ex, 10ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    co_return order;
  };
  auto order = runFor(io_, run(), 120s);
  ASSERT_TRUE(order.ok()) << order.error().message();
  ASSERT_EQ(order->size(), 3u);
  EXPECT_EQ(order->front(), 0) << "the Stat is answered before either upload ends";
  EXPECT_THAT(*order, ::testing::UnorderedElementsAre(0, 1, 2));
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/up1"), 32u << 20);
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/up2"), 32u << 20);
}

}  // namespace
}  // namespace vessel::e2b::envd
