// AgentClient against a hostile fake guest: every malformed, oversized,
// out-of-order, uncredited frame or a closed channel must fail the client's
// calls with an Error, and leave the host process (and other clients) alive.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "agentclient/agent_client.h"
#include "agentclient/testing/agent_harness.h"
#include "base/fd.h"

namespace vessel::agentclient {
namespace {

using agentproto::Frame;
using agentproto::MsgType;
using testing::runFor;
using namespace std::chrono_literals;

template <typename T>
asio::awaitable<void> store(asio::awaitable<T> a, std::shared_ptr<std::optional<T>> out) {
  out->emplace(co_await std::move(a));
}

// One fake guest: the test writes raw bytes on its end of a socketpair.
struct FakeGuest {
  explicit FakeGuest(asio::io_context& io) : io(io) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    guest = Fd(sv[1]);
    AgentClient::Socket s(io);
    s.assign(asio::local::stream_protocol(), sv[0]);
    client = AgentClient::create(std::move(s), "", "fake");
  }
  // Drives the client until the guest side has received one whole frame.
  std::optional<Frame> readRequest() {
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto f = dec.next();
      if (!f.ok()) return std::nullopt;
      if (f->has_value()) return std::move(**f);
      pollfd p{guest.get(), POLLIN, 0};
      if (::poll(&p, 1, 0) == 1) {
        char buf[65536];
        ssize_t n = ::read(guest.get(), buf, sizeof buf);
        if (n <= 0) return std::nullopt;
        (void)dec.feed(std::string_view(buf, static_cast<size_t>(n)));
        continue;
      }
      io.restart();
      io.run_one_for(10ms);
    }
    return std::nullopt;
  }
  void send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::write(guest.get(), bytes.data() + off, bytes.size() - off);
      if (n <= 0) {
        // The client stopped reading (it failed): the rest cannot matter.
        return;
      }
      off += static_cast<size_t>(n);
    }
  }
  template <typename M>
  void sendMsg(uint32_t stream, const M& m) {
    send(*agentproto::encodeMsgFrame(stream, m));
  }
  // Drives the client until it has failed (bounded).
  bool waitFailed() {
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!client->failure() && std::chrono::steady_clock::now() < deadline) {
      io.restart();
      io.run_one_for(10ms);
    }
    return client->failure().has_value();
  }

  asio::io_context& io;
  Fd guest;
  std::shared_ptr<AgentClient> client;
  agentproto::FrameDecoder dec;
};

class FakeAgentTest : public ::testing::Test {
 protected:
  asio::io_context io_;
};

TEST_F(FakeAgentTest, OversizedFrameFailsPendingCall) {
  FakeGuest g(io_);
  auto out = std::make_shared<std::optional<Status>>();
  asio::co_spawn(io_, store(g.client->ping(), out), asio::detached);
  auto req = g.readRequest();
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->type, MsgType::kPing);
  g.send(std::string("\xff\xff\xff\x7f\x04\x00\x00\x00", 8) + std::string(4, '\0'));
  ASSERT_TRUE(g.waitFailed());
  io_.restart();
  io_.run_for(20ms);
  ASSERT_TRUE(out->has_value());
  ASSERT_FALSE((*out)->ok());
  EXPECT_EQ((*out)->error().code(), Code::kProtocol);
  // Later calls fail at once; nothing is sent to a guest that lied.
  auto again = runFor(io_, g.client->ping(), 2s);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Code::kProtocol);
}

TEST_F(FakeAgentTest, FrameOnUnknownStream) {
  FakeGuest g(io_);
  g.send(agentproto::encodeFrame(MsgType::kOk, 99, ""));
  ASSERT_TRUE(g.waitFailed());
  EXPECT_EQ(g.client->failure()->code(), Code::kProtocol);
}

TEST_F(FakeAgentTest, OutputBeforeExecStartedIsOutOfOrder) {
  FakeGuest g(io_);
  ExecSpec s;
  s.argv = {"true"};
  auto out = std::make_shared<std::optional<Result<std::unique_ptr<Process>>>>();
  asio::co_spawn(io_, store(g.client->exec(s), out), asio::detached);
  auto req = g.readRequest();
  ASSERT_TRUE(req.has_value());
  g.send(agentproto::encodeFrame(MsgType::kStdout, req->stream, "early"));
  ASSERT_TRUE(g.waitFailed());
  io_.restart();
  io_.run_for(20ms);
  ASSERT_TRUE(out->has_value());
  ASSERT_FALSE((*out)->ok());
  EXPECT_EQ((*out)->error().code(), Code::kProtocol);
}

TEST_F(FakeAgentTest, OutputBeyondCreditFailsTheChannel) {
  FakeGuest g(io_);
  ExecSpec s;
  s.argv = {"yes"};
  auto out = std::make_shared<std::optional<Result<std::unique_ptr<Process>>>>();
  asio::co_spawn(io_, store(g.client->exec(s), out), asio::detached);
  auto req = g.readRequest();
  ASSERT_TRUE(req.has_value());
  g.sendMsg(req->stream, agentproto::ExecStartedMsg{1234, 0});
  io_.restart();
  io_.run_for(20ms);
  ASSERT_TRUE(out->has_value() && (*out)->ok());
  // Nobody reads the process: 2 MiB is twice the window the client granted.
  std::string chunk(agentproto::kDataChunk, 'x');
  for (int i = 0; i < 32 && !g.client->failure(); ++i) {
    g.send(agentproto::encodeFrame(MsgType::kStdout, req->stream, chunk));
    io_.restart();
    io_.poll();
  }
  ASSERT_TRUE(g.waitFailed());
  EXPECT_EQ(g.client->failure()->code(), Code::kProtocol);
  EXPECT_LE(g.client->bufferedBytes(), agentproto::kInitialWindow);
  // The process handle reports the failure too.
  auto& p = *out;  // optional<Result<unique_ptr<Process>>>
  Result<ProcessEvent> ev = Error(Code::kInternal, "");
  do ev = runFor(io_, (**p)->next(), 2s);
  while (ev.ok());
  EXPECT_EQ(ev.error().code(), Code::kProtocol);
}

TEST_F(FakeAgentTest, FloodOfEmptyFramesIsBounded) {
  FakeGuest g(io_);
  ExecSpec s;
  s.argv = {"true"};
  auto out = std::make_shared<std::optional<Result<std::unique_ptr<Process>>>>();
  asio::co_spawn(io_, store(g.client->exec(s), out), asio::detached);
  auto req = g.readRequest();
  ASSERT_TRUE(req.has_value());
  g.sendMsg(req->stream, agentproto::ExecStartedMsg{1, 0});
  std::string empty = agentproto::encodeFrame(MsgType::kStdout, req->stream, "");
  std::string batch;
  for (int i = 0; i < 1000; ++i) batch += empty;
  for (int i = 0; i < 40 && !g.client->failure(); ++i) {
    g.send(batch);
    io_.restart();
    io_.poll();
  }
  ASSERT_TRUE(g.waitFailed());
  EXPECT_EQ(g.client->failure()->code(), Code::kProtocol);
}

TEST_F(FakeAgentTest, MalformedPayloadAndUnknownType) {
  {
    FakeGuest g(io_);
    auto out = std::make_shared<std::optional<Result<agentproto::FileStat>>>();
    asio::co_spawn(io_, store(g.client->stat("/x"), out), asio::detached);
    auto req = g.readRequest();
    ASSERT_TRUE(req.has_value());
    g.send(agentproto::encodeFrame(MsgType::kStatResult, req->stream, "\x01\x02"));
    ASSERT_TRUE(g.waitFailed());
    io_.restart();
    io_.run_for(20ms);
    ASSERT_TRUE(out->has_value());
    EXPECT_EQ((*out)->error().code(), Code::kProtocol);
  }
  {
    FakeGuest g(io_);
    g.send(agentproto::encodeFrame(static_cast<MsgType>(999), 0, ""));
    ASSERT_TRUE(g.waitFailed());
    EXPECT_EQ(g.client->failure()->code(), Code::kProtocol);
  }
  {
    FakeGuest g(io_);
    std::string bad_flags = agentproto::encodeFrame(MsgType::kOk, 1, "");
    bad_flags[6] = 1;
    g.send(bad_flags);
    ASSERT_TRUE(g.waitFailed());
  }
  {
    // A hostile guest may even say Hello again mid-session.
    FakeGuest g(io_);
    g.send(agentproto::encodeFrame(MsgType::kHello, 0, agentproto::encodeHello({})));
    ASSERT_TRUE(g.waitFailed());
  }
}

TEST_F(FakeAgentTest, ClosedChannelFailsCallsAsUnavailable) {
  FakeGuest g(io_);
  ExecSpec s;
  s.argv = {"true"};
  auto out = std::make_shared<std::optional<Result<std::unique_ptr<Process>>>>();
  asio::co_spawn(io_, store(g.client->exec(s), out), asio::detached);
  ASSERT_TRUE(g.readRequest().has_value());
  g.guest.reset();
  ASSERT_TRUE(g.waitFailed());
  io_.restart();
  io_.run_for(20ms);
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->error().code(), Code::kUnavailable);
}

TEST_F(FakeAgentTest, OneBadGuestDoesNotAffectAnother) {
  FakeGuest bad(io_), good(io_);
  auto out = std::make_shared<std::optional<Status>>();
  asio::co_spawn(io_, store(good.client->ping(), out), asio::detached);
  auto req = good.readRequest();
  ASSERT_TRUE(req.has_value());
  std::string garbage = testing::PatternSource(3).next(4096);
  bad.send(garbage);
  ASSERT_TRUE(bad.waitFailed());
  good.send(agentproto::encodeFrame(MsgType::kPong, req->stream, req->payload));
  good.send(agentproto::encodeFrame(MsgType::kOk, req->stream, ""));
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!out->has_value() && std::chrono::steady_clock::now() < deadline) {
    io_.restart();
    io_.run_one_for(10ms);
  }
  ASSERT_TRUE(out->has_value());
  EXPECT_TRUE((*out)->ok()) << (*out)->error().message();
  EXPECT_FALSE(good.client->failure());
}

TEST_F(FakeAgentTest, ReconnectSkipsStaleBytesUntilTheResyncEcho) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Fd guest(sv[1]);
  AgentClient::Socket s(io_);
  s.assign(asio::local::stream_protocol(), sv[0]);
  auto out = std::make_shared<std::optional<Result<std::shared_ptr<AgentClient>>>>();
  asio::co_spawn(
      io_,
      store(AgentClient::reconnect(std::move(s), "re", std::chrono::steady_clock::now() + 5s), out),
      asio::detached);
  // The guest side sees zero padding (empty control frames), then Resync.
  agentproto::FrameDecoder dec;
  std::optional<uint64_t> nonce;
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!nonce && std::chrono::steady_clock::now() < deadline) {
    io_.restart();
    io_.run_one_for(10ms);
    char buf[65536];
    pollfd p{guest.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) continue;
    ssize_t n = ::read(guest.get(), buf, sizeof buf);
    ASSERT_GT(n, 0);
    ASSERT_TRUE(dec.feed(std::string_view(buf, static_cast<size_t>(n))).ok());
    for (;;) {
      auto f = dec.next();
      ASSERT_TRUE(f.ok());
      if (!f->has_value()) break;
      if ((*f)->type == MsgType::kResync)
        nonce = agentproto::decodeMsg<agentproto::ResyncMsg>((*f)->payload)->nonce;
      else
        EXPECT_EQ(static_cast<int>((*f)->type), 0);
    }
  }
  ASSERT_TRUE(nonce.has_value());
  // Half a frame of the old session and a spontaneous Hello come before the
  // echo; the client must skip them, not take them for violations.
  std::string stale = agentproto::encodeFrame(MsgType::kStdout, 3, "old output").substr(0, 9);
  stale += agentproto::encodeFrame(MsgType::kHello, 0, agentproto::encodeHello({}));
  std::string echo = *agentproto::encodeMsgFrame(0, agentproto::ResyncMsg{*nonce});
  stale += echo;
  ASSERT_EQ(::write(guest.get(), stale.data(), stale.size()), static_cast<ssize_t>(stale.size()));
  deadline = std::chrono::steady_clock::now() + 5s;
  while (!out->has_value() && std::chrono::steady_clock::now() < deadline) {
    io_.restart();
    io_.run_one_for(10ms);
  }
  ASSERT_TRUE(out->has_value());
  ASSERT_TRUE((*out)->ok()) << (*out)->error().message();
  EXPECT_FALSE((***out)->failure());
  (***out)->close();
}

TEST_F(FakeAgentTest, CallsHonorACallersDeadline) {
  // A guest that never answers must not hang a caller that set a deadline.
  using namespace asio::experimental::awaitable_operators;
  FakeGuest g(io_);
  auto bounded = [&]() -> asio::awaitable<Result<bool>> {
    asio::steady_timer t(co_await asio::this_coro::executor, 100ms);
    auto r = co_await (g.client->ping() || t.async_wait(asio::use_awaitable));
    co_return r.index() == 1;
  };
  auto timed_out = runFor(io_, bounded(), 5s);
  ASSERT_TRUE(timed_out.ok()) << timed_out.error().message();
  EXPECT_TRUE(*timed_out);
  // The abandoned stream's late answer is still accepted, not a violation.
  auto req = g.readRequest();
  ASSERT_TRUE(req.has_value());
  g.send(agentproto::encodeFrame(MsgType::kPong, req->stream, req->payload));
  g.send(agentproto::encodeFrame(MsgType::kOk, req->stream, ""));
  io_.restart();
  io_.run_for(50ms);
  EXPECT_FALSE(g.client->failure());
}

TEST_F(FakeAgentTest, AListingBeyondTheEntryBoundFailsClearlyAndTheChannelLivesOn) {
  // A guest answering a listing with more entries than the host will hold
  // (within credit and the byte bound): the call fails with what to do,
  // the stream is cancelled, and the channel stays usable.
  FakeGuest g(io_);
  auto out = std::make_shared<std::optional<Result<std::vector<agentproto::ListEntry>>>>();
  asio::co_spawn(io_, store(g.client->list("/big", 1), out), asio::detached);
  auto req = g.readRequest();
  ASSERT_TRUE(req.has_value());
  ASSERT_EQ(req->type, MsgType::kList);
  agentproto::ListEntriesMsg batch;
  for (int i = 0; i < 4000; ++i) batch.entries.push_back({"f" + std::to_string(i), {}});
  auto frame = agentproto::encodeMsgFrame(req->stream, batch);
  ASSERT_TRUE(frame.ok()) << frame.error().message();
  uint32_t cost = agentproto::frameCost(frame->size() - agentproto::kHeaderSize);
  int64_t credit = agentproto::kInitialWindow;
  size_t sent = 0;
  bool cancelled = false;
  while (!out->has_value() && !cancelled && sent <= kMaxListEntries) {
    while (credit < cost && !cancelled) {
      auto f = g.readRequest();
      ASSERT_TRUE(f.has_value()) << "the client granted no credit";
      if (f->type == MsgType::kCancel) cancelled = true;
      if (f->type == MsgType::kCredit)
        credit += agentproto::decodeMsg<agentproto::CreditMsg>(f->payload)->bytes;
    }
    if (cancelled) break;
    g.send(*frame);
    credit -= cost;
    sent += batch.entries.size();
    io_.restart();
    io_.poll();
  }
  for (int i = 0; i < 500 && !out->has_value(); ++i) {
    io_.restart();
    io_.run_one_for(10ms);
  }
  ASSERT_TRUE(out->has_value());
  ASSERT_FALSE((*out)->ok());
  EXPECT_EQ((*out)->error().code(), Code::kResourceExhausted);
  EXPECT_NE((*out)->error().message().find("more than 100000 entries"), std::string::npos)
      << (*out)->error().message();
  EXPECT_FALSE(g.client->failure());
}

}  // namespace
}  // namespace vessel::agentclient
