// Sandbox ports through the real agent run on the host: ConnectPort relays
// a TCP connection to a loopback listener of this test, both ways under
// credit, with half-closes, and says so when nothing listens.
#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "agentclient/agent_client.h"
#include "agentclient/testing/agent_harness.h"

namespace vessel::agentclient {
namespace {

using testing::runFor;
using namespace std::chrono_literals;
using tcp = asio::ip::tcp;
constexpr auto kTok = asio::as_tuple(asio::use_awaitable);

class AgentPortsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto h = testing::HostAgent::start(io_, VESSEL_AGENT_BINARY);
    ASSERT_TRUE(h.ok()) << h.error().message();
    agent_ = std::move(*h);
    c_ = agent_->client();
  }
  void TearDown() override {
    if (c_) EXPECT_FALSE(c_->failure()) << c_->failure()->message();
  }
  // A listener on the host's loopback; the agent runs on the host, so its
  // 127.0.0.1 is this one.
  tcp::acceptor listen(const char* addr = "127.0.0.1") {
    tcp::acceptor a(io_, tcp::endpoint(asio::ip::make_address(addr), 0));
    return a;
  }

  asio::io_context io_;
  std::unique_ptr<testing::HostAgent> agent_;
  std::shared_ptr<AgentClient> c_;
};

// Echoes everything until the client half-closes, then closes.
asio::awaitable<void> echoOnce(tcp::acceptor& a) {
  auto [ec, sock] = co_await a.async_accept(kTok);
  if (ec) co_return;
  std::vector<char> buf(32 * 1024);
  for (;;) {
    auto [rec, n] = co_await sock.async_read_some(asio::buffer(buf), kTok);
    if (rec) break;
    auto [wec, wn] = co_await asio::async_write(sock, asio::buffer(buf.data(), n), kTok);
    if (wec) break;
  }
  boost::system::error_code ignored;
  sock.shutdown(tcp::socket::shutdown_send, ignored);
}

// Writes `total` pattern bytes, records their hash, then half-closes.
asio::awaitable<void> writePattern(std::shared_ptr<PortStream> port,
                                   std::shared_ptr<std::string> sent, size_t total) {
  testing::PatternSource src(7);
  testing::Sha256 h;
  for (size_t done = 0; done < total;) {
    std::string chunk = src.next(std::min<size_t>(100 * 1000, total - done));
    h.update(chunk);
    if (!(co_await port->write(chunk)).ok()) co_return;
    done += chunk.size();
  }
  *sent = h.hex();
  (void)co_await port->closeWrite();
}

// Sends "bye" and closes.
asio::awaitable<void> sayByeOnce(tcp::acceptor& a) {
  auto [ec, sock] = co_await a.async_accept(kTok);
  if (ec) co_return;
  co_await asio::async_write(sock, asio::buffer(std::string_view("bye")), kTok);
  sock.close();
}

TEST_F(AgentPortsTest, RelaysBothWaysUnderCreditWithHalfClose) {
  auto a = listen();
  asio::co_spawn(io_, echoOnce(a), asio::detached);
  // Three times the 1 MiB window each way: only credit keeps it flowing.
  constexpr size_t kTotal = 3u << 20;
  auto r = runFor(
      io_,
      [&]() -> asio::awaitable<Result<std::string>> {
        auto p = co_await c_->connectPort(a.local_endpoint().port());
        if (!p.ok()) co_return std::move(p).error();
        std::shared_ptr<PortStream> port(std::move(*p));
        auto sent = std::make_shared<std::string>();
        asio::co_spawn(io_, writePattern(port, sent, kTotal), asio::detached);
        testing::Sha256 got;
        size_t n = 0;
        for (;;) {
          auto chunk = co_await port->read();
          if (!chunk.ok()) co_return std::move(chunk).error();
          if (!*chunk) break;
          got.update(**chunk);
          n += (*chunk)->size();
        }
        if (n != kTotal) co_return Error(Code::kInternal, "echoed " + std::to_string(n));
        co_return got.hex() == *sent ? std::string("same") : std::string("differs");
      }(),
      120s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, "same");
  // The host never held more than the windows.
  EXPECT_LE(c_->bufferedBytes(), agentproto::kInitialWindow);
}

TEST_F(AgentPortsTest, ServerClosingFirstIsEndOfFile) {
  auto a = listen();
  asio::co_spawn(io_, sayByeOnce(a), asio::detached);
  auto r = runFor(
      io_,
      [&]() -> asio::awaitable<Result<std::string>> {
        auto p = co_await c_->connectPort(a.local_endpoint().port());
        if (!p.ok()) co_return std::move(p).error();
        std::string all;
        for (;;) {
          auto chunk = co_await (*p)->read();
          if (!chunk.ok()) co_return std::move(chunk).error();
          if (!*chunk) break;
          all += **chunk;
        }
        // Reading past the end stays at the end.
        auto again = co_await (*p)->read();
        if (!again.ok() || *again) co_return Error(Code::kInternal, "read past the end");
        VESSEL_CO_TRY(co_await (*p)->closeWrite());
        co_return all;
      }(),
      30s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, "bye");
}

TEST_F(AgentPortsTest, NothingListeningIsRefused) {
  uint16_t port;
  {
    auto a = listen();
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  auto r = runFor(io_, c_->connectPort(port), 30s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
  EXPECT_EQ(r.error().sysErrno(), ECONNREFUSED);
  EXPECT_NE(r.error().message().find("connection refused"), std::string::npos)
      << r.error().message();
  // The channel is fine afterwards.
  EXPECT_TRUE(runFor(io_, c_->ping(), 10s).ok());
  auto zero = runFor(io_, c_->connectPort(0), 10s);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().code(), Code::kInvalidArgument);
}

TEST_F(AgentPortsTest, FallsBackToIpv6Loopback) {
  boost::system::error_code ec;
  tcp::acceptor a(io_);
  a.open(tcp::v6(), ec);
  if (!ec) a.set_option(asio::ip::v6_only(true), ec);
  if (!ec) a.bind(tcp::endpoint(asio::ip::make_address("::1"), 0), ec);
  if (!ec) a.listen(16, ec);
  if (ec) GTEST_SKIP() << "no IPv6 loopback here: " << ec.message();
  asio::co_spawn(io_, echoOnce(a), asio::detached);
  auto r = runFor(
      io_,
      [&]() -> asio::awaitable<Result<std::string>> {
        auto p = co_await c_->connectPort(a.local_endpoint().port());
        if (!p.ok()) co_return std::move(p).error();
        VESSEL_CO_TRY(co_await (*p)->write("ping"));
        VESSEL_CO_TRY(co_await (*p)->closeWrite());
        std::string all;
        for (;;) {
          auto chunk = co_await (*p)->read();
          if (!chunk.ok()) co_return std::move(chunk).error();
          if (!*chunk) break;
          all += **chunk;
        }
        co_return all;
      }(),
      30s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, "ping");
}

}  // namespace
}  // namespace vessel::agentclient
