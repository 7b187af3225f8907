#include "hypervisor/qemu/qmp.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <thread>

#include "base/run_blocking.h"

namespace vessel::hypervisor::qemu {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

TEST(QmpParseTest, Kinds) {
  auto g = parseQmpMessage(R"({"QMP": {"version": {}, "capabilities": []}})");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->kind, QmpMessage::Kind::kGreeting);
  auto r = parseQmpMessage(R"({"return": {"status": "running"}, "id": 4})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, QmpMessage::Kind::kReturn);
  EXPECT_EQ(r->id, 4u);
  auto e = parseQmpMessage(R"({"error": {"class": "GenericError", "desc": "no"}, "id": 5})");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->error_class, "GenericError");
  auto ev = parseQmpMessage(R"({"event": "STOP", "timestamp": {}})");
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->event, "STOP");
}

TEST(QmpParseTest, GarbageIsAProtocolError) {
  for (const char* bad : {"", "not json", "[1,2]", R"({"neither": 1})", R"({"event": 5})",
                          R"({"error": "x"})", "{\"return\": {"}) {
    auto m = parseQmpMessage(bad);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_EQ(m.error().code(), Code::kProtocol);
  }
  std::string deep(100, '[');
  EXPECT_FALSE(parseQmpMessage(deep).ok());
}

// A scripted QMP peer on the other end of a socketpair.
class QmpClientTest : public ::testing::Test {
 protected:
  QmpClientTest() : client_sock_(io_), server_(io_) {
    asio::local::connect_pair(client_sock_, server_);
  }
  void serverSend(const std::string& s) { asio::write(server_, asio::buffer(s)); }
  std::string serverReadLine() {
    asio::read_until(server_, asio::dynamic_buffer(sbuf_), '\n');
    auto n = sbuf_.find('\n');
    std::string line = sbuf_.substr(0, n);
    sbuf_.erase(0, n + 1);
    return line;
  }
  template <typename T>
  T run(asio::awaitable<T> a) {
    return runBlocking(io_, std::move(a));
  }
  std::shared_ptr<QmpClient> handshake() {
    serverSend(R"({"QMP": {"version": {}, "capabilities": []}})"
               "\r\n");
    // The client sends qmp_capabilities with id 1; answer it when it arrives.
    std::thread t([&] {
      std::string l = serverReadLine();
      EXPECT_THAT(l, HasSubstr("qmp_capabilities"));
      serverSend(R"({"return": {}, "id": 1})"
                 "\r\n");
    });
    auto c = run(QmpClient::handshake(std::move(client_sock_), Clock::now() + 5s));
    t.join();
    EXPECT_TRUE(c.ok()) << c.error().message();
    return c.ok() ? *c : nullptr;
  }

  asio::io_context io_;
  Socket client_sock_;
  Socket server_;
  std::string sbuf_;
};

TEST_F(QmpClientTest, CommandReturnWithInterleavedEvent) {
  auto c = handshake();
  ASSERT_TRUE(c);
  std::vector<std::string> events;
  c->onEvent([&](const std::string& n, const json::value&) { events.push_back(n); });
  std::thread t([&] {
    EXPECT_THAT(serverReadLine(), HasSubstr(R"("execute":"cont")"));
    serverSend(R"({"event": "RESUME", "timestamp": {}})"
               "\r\n"
               R"({"return": {}, "id": 2})"
               "\r\n");
  });
  auto r = run(c->execute("cont"));
  t.join();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(events, std::vector<std::string>{"RESUME"});
}

TEST_F(QmpClientTest, RefusalCarriesQemusReason) {
  auto c = handshake();
  ASSERT_TRUE(c);
  std::thread t([&] {
    serverReadLine();
    serverSend(R"({"error": {"class": "CommandNotFound", "desc": "nope"}, "id": 2})"
               "\n");
  });
  auto r = run(c->execute("frobnicate"));
  t.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kFailedPrecondition);
  EXPECT_THAT(r.error().message(), HasSubstr("CommandNotFound: nope"));
}

TEST_F(QmpClientTest, TimeoutIsDeadlineExceeded) {
  auto c = handshake();
  ASSERT_TRUE(c);
  auto r = run(c->execute("query-status", {}, 50ms));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDeadlineExceeded);
}

TEST_F(QmpClientTest, GarbageFailsPendingAndLaterCommands) {
  auto c = handshake();
  ASSERT_TRUE(c);
  std::thread t([&] {
    serverReadLine();
    serverSend("this is not json\n");
  });
  auto r = run(c->execute("query-status"));
  t.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kProtocol);
  EXPECT_TRUE(c->failed());
  auto again = run(c->execute("query-status"));
  EXPECT_FALSE(again.ok());
}

TEST_F(QmpClientTest, ClosedSocketIsUnavailable) {
  auto c = handshake();
  ASSERT_TRUE(c);
  std::thread t([&] {
    serverReadLine();
    server_.close();
  });
  auto r = run(c->execute("query-status"));
  t.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
}

TEST_F(QmpClientTest, OverlongLineIsRefused) {
  auto c = handshake();
  ASSERT_TRUE(c);
  std::thread t([&] {
    serverReadLine();
    std::string big(kMaxQmpLine + 10, 'x');
    boost::system::error_code ec;
    asio::write(server_, asio::buffer(big), ec);
  });
  auto r = run(c->execute("query-status"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message(), HasSubstr("longer than the limit"));
  c->close();
  server_.close();
  t.join();
}

TEST_F(QmpClientTest, NoGreetingTimesOut) {
  auto c = run(QmpClient::handshake(std::move(client_sock_), Clock::now() + 50ms));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Code::kDeadlineExceeded);
}

}  // namespace
}  // namespace vessel::hypervisor::qemu
