// The shared streaming pieces (http/stream.h) on a real loopback connection:
// chunk framing, the last chunk written with the last data, a download cut
// by its source's failure, and what wakes a wait for a stream's next event.
#include "http/stream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>

namespace vessel::http {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// A connected pair on loopback: `server` as a handler owns it, `client` raw.
struct Pair {
  explicit Pair(asio::io_context& io) : server(io), client(io) {
    tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
    client.connect(a.local_endpoint());
    server.socket() = a.accept();
  }
  // Everything the client receives until the server's side ends.
  std::string drain() {
    std::string all;
    boost::system::error_code ec;
    asio::read(client, asio::dynamic_buffer(all), ec);
    return all;
  }
  boost::beast::tcp_stream server;
  tcp::socket client;
};

http::response<http::empty_body> okHead() {
  http::response<http::empty_body> h{http::status::ok, 11};
  h.keep_alive(false);
  return h;
}

template <typename F>
void runCoro(asio::io_context& io, F f) {
  bool done = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await f();
        done = true;
      },
      asio::detached);
  io.run_for(10s);
  ASSERT_TRUE(done);
}

TEST(ChunkedWriterTest, FramesChunksSkipsEmptyOnesAndEndsWithTheLastData) {
  asio::io_context io;
  Pair p(io);
  runCoro(io, [&]() -> asio::awaitable<void> {
    // (Awaited into names: g++ 12 and co_await in a condition, CONTRIBUTING.md.)
    ChunkedWriter out(p.server);
    auto head = okHead();
    bool wrote = co_await out.head(std::move(head));
    EXPECT_TRUE(wrote);
    wrote = co_await out.chunk("hello");
    EXPECT_TRUE(wrote);
    wrote = co_await out.chunk("");  // not the last chunk
    EXPECT_TRUE(wrote);
    wrote = co_await out.last("bye!");
    EXPECT_TRUE(wrote);
    p.server.socket().shutdown(tcp::socket::shutdown_send);
  });
  std::string all = p.drain();
  EXPECT_THAT(all, HasSubstr("Transfer-Encoding: chunked\r\n"));
  EXPECT_THAT(all, EndsWith("\r\n\r\n5\r\nhello\r\n4\r\nbye!\r\n0\r\n\r\n"));
}

TEST(ChunkedWriterTest, ADownloadCutByItsSourceHasNoLastChunk) {
  asio::io_context io;
  Pair p(io);
  std::deque<Result<std::optional<std::string>>> pieces;
  pieces.emplace_back(std::optional<std::string>("abc"));
  pieces.emplace_back(Error(Code::kUnavailable, "agent gone"));
  runCoro(io, [&]() -> asio::awaitable<void> {
    ChunkedWriter out(p.server);
    auto head = okHead();
    bool wrote = co_await out.head(std::move(head));
    EXPECT_TRUE(wrote);
    auto next = [&]() -> asio::awaitable<Result<std::optional<std::string>>> {
      auto r = std::move(pieces.front());
      pieces.pop_front();
      co_return r;
    };
    auto copied = co_await copyChunks(out, next);
    EXPECT_FALSE(copied.ok());
    if (!copied.ok()) {
      EXPECT_EQ(copied.error().message(), "agent gone");
    }
    p.server.socket().shutdown(tcp::socket::shutdown_send);
  });
  std::string all = p.drain();
  EXPECT_THAT(all, EndsWith("3\r\nabc\r\n"));
  EXPECT_THAT(all, Not(HasSubstr("0\r\n\r\n")));
}

TEST(ChunkedWriterTest, AWholeDownloadEndsWithTheLastChunk) {
  asio::io_context io;
  Pair p(io);
  std::deque<Result<std::optional<std::string>>> pieces;
  pieces.emplace_back(std::optional<std::string>("ab"));
  pieces.emplace_back(std::optional<std::string>(""));
  pieces.emplace_back(std::optional<std::string>());
  runCoro(io, [&]() -> asio::awaitable<void> {
    ChunkedWriter out(p.server);
    auto head = okHead();
    bool wrote = co_await out.head(std::move(head));
    EXPECT_TRUE(wrote);
    auto next = [&]() -> asio::awaitable<Result<std::optional<std::string>>> {
      auto r = std::move(pieces.front());
      pieces.pop_front();
      co_return r;
    };
    auto copied = co_await copyChunks(out, next);
    EXPECT_TRUE(copied.ok());
    if (copied.ok()) {
      EXPECT_TRUE(*copied);
    }
    p.server.socket().shutdown(tcp::socket::shutdown_send);
  });
  EXPECT_THAT(p.drain(), EndsWith("\r\n\r\n2\r\nab\r\n0\r\n\r\n"));
}

using Ch = asio::experimental::channel<void(boost::system::error_code, int)>;

asio::awaitable<int> receive(Ch& ch) {
  auto [ec, v] = co_await ch.async_receive(asio::as_tuple(asio::use_awaitable));
  co_return ec ? -1 : v;
}

// The wait wakes for the next event, the keepalive, the deadline and the
// client going away, and a wait a timer won loses no event.
TEST(NextOrGoneTest, WakesForEachCauseAndLosesNoEvent) {
  asio::io_context io;
  Pair p(io);
  Ch ch(io, 4);
  runCoro(io, [&]() -> asio::awaitable<void> {
    asio::steady_timer ka(io);
    asio::steady_timer never(io, asio::steady_timer::time_point::max());
    auto n1 = receive(ch);
    auto w1 = co_await nextOrGone(std::move(n1), p.server, ka, 20ms, never);
    EXPECT_EQ(w1.woke, Woke::kKeepalive);
    EXPECT_FALSE(w1.next.has_value());

    // Sent by another coroutine, not try_send: after a cancelled receive,
    // Boost 1.81's channel stops buffering (its send state says "block")
    // and hands a value only to a waiting receiver.
    auto send = [&]() -> asio::awaitable<void> {
      (void)co_await ch.async_send(boost::system::error_code(), 7,
                                   asio::as_tuple(asio::use_awaitable));
    };
    asio::co_spawn(io, send, asio::detached);
    auto n2 = receive(ch);
    auto w2 = co_await nextOrGone(std::move(n2), p.server, ka, 10s, never);
    EXPECT_EQ(w2.woke, Woke::kNext);
    EXPECT_EQ(w2.next.value_or(0), 7);

    asio::steady_timer deadline(io);
    deadline.expires_after(20ms);
    auto n3 = receive(ch);
    auto w3 = co_await nextOrGone(std::move(n3), p.server, ka, 10s, deadline);
    EXPECT_EQ(w3.woke, Woke::kDeadline);

    p.client.close();
    auto n4 = receive(ch);
    auto w4 = co_await nextOrGone(std::move(n4), p.server, ka, 10s, never);
    EXPECT_EQ(w4.woke, Woke::kClientGone);
  });
}

}  // namespace
}  // namespace vessel::http
