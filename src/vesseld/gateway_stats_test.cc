// /metrics and a gateway that does not answer: the scrape renders the last
// counters, marked stale, while the io thread keeps serving; one read is in
// flight however many scrapes come. The "gateway" is a unix socket served
// by a plain thread of the test's that answers or holds requests.
#include "vesseld/gateway_stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/fd.h"
#include "base/run_blocking.h"

namespace vessel::vesseld {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// Accepts connections one after another; answers each request line with
// `reply`, or, while holding, reads it and answers nothing until released.
class FakeGateway {
 public:
  explicit FakeGateway(std::string path) : path_(std::move(path)) {
    ::unlink(path_.c_str());
    listener_ = Fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path_.c_str(), path_.size() + 1);
    // SAFETY: sockaddr_un is a sockaddr for bind().
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener_.get(), 8) != 0)
      ADD_FAILURE() << "fake gateway: " << std::strerror(errno);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeGateway() {
    {
      std::lock_guard l(mu_);
      holding_ = false;
    }
    cv_.notify_all();
    ::shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
    ::unlink(path_.c_str());
  }
  void setReply(std::string r) {
    std::lock_guard l(mu_);
    reply_ = std::move(r);
  }
  void hold(bool on) {
    {
      std::lock_guard l(mu_);
      holding_ = on;
    }
    cv_.notify_all();
  }
  // Waits (bounded) until `n` requests are held unanswered.
  bool waitHeld(int n) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, 30s, [&] { return held_ == n; });
  }
  int connections() {
    std::lock_guard l(mu_);
    return connections_;
  }

 private:
  void serve() {
    for (;;) {
      Fd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c) return;
      {
        std::lock_guard l(mu_);
        ++connections_;
      }
      char buf[4096];
      std::string in;
      while (in.find('\n') == std::string::npos) {
        ssize_t n = ::read(c.get(), buf, sizeof buf);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      std::unique_lock l(mu_);
      if (holding_) {
        ++held_;
        cv_.notify_all();
        cv_.wait(l, [&] { return !holding_; });
        --held_;
        continue;  // the held request is never answered: the connection closes
      }
      std::string r = reply_ + "\n";
      l.unlock();
      (void)::send(c.get(), r.data(), r.size(), MSG_NOSIGNAL);
    }
  }

  std::string path_;
  Fd listener_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string reply_;
  bool holding_ = false;
  int held_ = 0, connections_ = 0;
};

class GatewayStatsTest : public ::testing::Test {
 protected:
  std::string socketPath() {
    return ::testing::TempDir() + "/gwstats-" + std::to_string(::getpid()) + ".sock";
  }
  // One scrape as the /metrics handler does it: refresh, then render.
  boost::asio::awaitable<std::string> scrape(GatewayStats& s) {
    co_await s.refresh();
    metrics::SampleWriter w;
    s.write(w, true);
    co_return w.text();
  }
  boost::asio::io_context io_;
};

TEST_F(GatewayStatsTest, RendersTheGatewaysCountersAsFresh) {
  FakeGateway gw(socketPath());
  gw.setReply(R"({"ok":true,"counters":{"tcp_allow_policy":3,"tcp_allow":3,"restarts":1},)"
              R"("connections":2})");
  GatewayStats stats(io_, {.control_socket = socketPath(), .wait = 10s, .max_age = 0ms});
  std::string out = runBlocking(io_, scrape(stats));
  EXPECT_THAT(
      out,
      HasSubstr(R"(vessel_gateway_events_total{kind="tcp",verdict="allow",reason="policy"} 3)"));
  EXPECT_THAT(out, HasSubstr("vessel_gateway_restarts_total 1"));
  EXPECT_THAT(out, HasSubstr("vessel_gateway_connections 2"));
  EXPECT_THAT(out, HasSubstr("vessel_gateway_stats_stale 0"));
}

TEST_F(GatewayStatsTest, AGatewayThatNeverAnswersLeavesTheIoThreadServing) {
  FakeGateway gw(socketPath());
  gw.setReply(R"({"ok":true,"counters":{"dns_deny_policy":7}})");
  GatewayStats stats(io_, {.control_socket = socketPath(), .wait = 200ms, .max_age = 0ms});
  ASSERT_THAT(runBlocking(io_, scrape(stats)), HasSubstr("vessel_gateway_stats_stale 0"));

  // From now on the gateway reads requests and never answers.
  gw.hold(true);
  std::vector<std::string> order;
  std::string out;
  bool done = false;
  boost::asio::co_spawn(
      io_,
      [&]() -> boost::asio::awaitable<void> {
        out = co_await scrape(stats);
        order.push_back("scrape");
        done = true;
      },
      boost::asio::detached);
  // Another request on the same io thread, queued behind the scrape.
  boost::asio::post(io_, [&] { order.push_back("other request"); });
  io_.restart();
  while (!done) io_.run_one();

  // The other request ran while the scrape waited, and the scrape came
  // back while its read was still held by the gateway, with the last
  // counters, marked stale.
  EXPECT_EQ(order, (std::vector<std::string>{"other request", "scrape"}));
  EXPECT_TRUE(gw.waitHeld(1));
  EXPECT_THAT(out, HasSubstr("vessel_gateway_stats_stale 1"));
  EXPECT_THAT(
      out,
      HasSubstr(R"(vessel_gateway_events_total{kind="dns",verdict="deny",reason="policy"} 7)"));
  EXPECT_THAT(out, HasSubstr("vessel_gateway_stats_age_seconds"));

  // More scrapes while that read hangs start no new one.
  for (int i = 0; i < 3; ++i)
    EXPECT_THAT(runBlocking(io_, scrape(stats)), HasSubstr("vessel_gateway_stats_stale 1"));
  EXPECT_EQ(stats.readsStarted(), 2u);
  EXPECT_EQ(gw.connections(), 2);

  // Once the gateway answers again, so does /metrics.
  gw.setReply(R"({"ok":true,"counters":{"dns_deny_policy":9}})");
  gw.hold(false);
  std::string again;
  for (int i = 0; i < 100 && again.find("stale 0") == std::string::npos; ++i)
    again = runBlocking(io_, scrape(stats));
  EXPECT_THAT(again, HasSubstr("vessel_gateway_stats_stale 0"));
  EXPECT_THAT(again, HasSubstr(R"(reason="policy"} 9)"));
}

TEST_F(GatewayStatsTest, NoGatewayAtAllIsStaleWithoutCounters) {
  GatewayStats stats(io_, {.control_socket = socketPath() + ".absent", .wait = 10s});
  std::string out = runBlocking(io_, scrape(stats));
  EXPECT_THAT(out, HasSubstr("vessel_gateway_stats_stale 1"));
  EXPECT_THAT(out, Not(HasSubstr("vessel_gateway_events_total")));
}

}  // namespace
}  // namespace vessel::vesseld
