// The response relay against byte streams as servers send them, fed whole
// and one byte at a time (a framing decision must not depend on how the
// bytes arrive).
#include "http/relay.h"

#include <gtest/gtest.h>

namespace vessel::http {
namespace {

struct Fed {
  Result<ResponseRelay::State> state = ResponseRelay::State::kFramed;
  std::string out;
};

// Feeds `bytes` whole (piece == 0) or in pieces of `piece` bytes; stops at
// the first error.
Fed feed(ResponseRelay& r, std::string_view bytes, size_t piece = 0) {
  Fed f;
  if (piece == 0) piece = bytes.size() ? bytes.size() : 1;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    f.state = r.feed(bytes.substr(at, piece), f.out);
    if (!f.state.ok()) break;
  }
  return f;
}

request_header<> upgradeRequest(bool connection_upgrade) {
  request_header<> h;
  h.method(verb::get);
  h.target("/ws");
  h.version(11);
  h.set(field::host, "x");
  h.set(field::upgrade, "websocket");
  if (connection_upgrade) h.set(field::connection, "keep-alive, Upgrade");
  return h;
}

class RelayTest : public ::testing::TestWithParam<size_t> {};

TEST_P(RelayTest, ContinueThenFinalResponse) {
  ResponseRelay r;
  r.expect({});
  std::string bytes =
      "HTTP/1.1 100 Continue\r\n\r\n"
      "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
  auto f = feed(r, bytes, GetParam());
  ASSERT_TRUE(f.state.ok()) << f.state.error().message();
  EXPECT_EQ(*f.state, ResponseRelay::State::kFramed);
  EXPECT_EQ(f.out, bytes);
  // The 100 did not answer the request: only the 201 did.
  EXPECT_EQ(r.answered(), 1u);
  EXPECT_EQ(r.waiting(), 0u);
}

TEST_P(RelayTest, InterimAloneLeavesTheRequestWaiting) {
  ResponseRelay r;
  r.expect({});
  auto f = feed(r, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n", GetParam());
  ASSERT_TRUE(f.state.ok());
  EXPECT_EQ(r.answered(), 0u);
  EXPECT_EQ(r.waiting(), 1u);
  EXPECT_FALSE(r.end().ok()) << "closing before the final response cuts it";
}

TEST_P(RelayTest, SwitchAfterAWellFormedUpgrade) {
  ASSERT_TRUE(wellFormedUpgrade(upgradeRequest(true)));
  ResponseRelay r;
  r.expect({false, wellFormedUpgrade(upgradeRequest(true))});
  std::string head =
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
  std::string frames = "\x81\x05hello not http at all";
  auto f = feed(r, head + frames, GetParam());
  ASSERT_TRUE(f.state.ok()) << f.state.error().message();
  EXPECT_EQ(*f.state, ResponseRelay::State::kOpaque);
  EXPECT_TRUE(r.opaque());
  EXPECT_EQ(f.out, head + frames);
  std::string more;
  ASSERT_TRUE(r.feed(std::string_view("\x88\x00", 2), more).ok());
  EXPECT_EQ(more, std::string("\x88\x00", 2));
}

TEST_P(RelayTest, SwitchWithoutAnUpgradeRequestIsRefused) {
  // An Upgrade header without `Connection: upgrade` asks for nothing.
  EXPECT_FALSE(wellFormedUpgrade(upgradeRequest(false)));
  auto h10 = upgradeRequest(true);
  h10.version(10);
  EXPECT_FALSE(wellFormedUpgrade(h10));
  ResponseRelay r;
  r.expect({false, wellFormedUpgrade(upgradeRequest(false))});
  auto f = feed(r,
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\n\r\n\x81\x05hello",
                GetParam());
  ASSERT_FALSE(f.state.ok());
  EXPECT_EQ(f.state.error().code(), Code::kProtocol);
  EXPECT_EQ(f.out.find("101"), std::string::npos) << "the client never sees the switch";
  EXPECT_FALSE(r.opaque());
}

TEST_P(RelayTest, UpgradeHeaderOnA200StaysFramed) {
  ResponseRelay r;
  r.expect({false, true});
  r.expect({});
  std::string first =
      "HTTP/1.1 200 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Content-Length: 3\r\n\r\nabc";
  std::string second = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
  auto f = feed(r, first + second, GetParam());
  ASSERT_TRUE(f.state.ok()) << f.state.error().message();
  EXPECT_EQ(*f.state, ResponseRelay::State::kFramed);
  EXPECT_FALSE(r.opaque());
  EXPECT_EQ(f.out, first + second);
  EXPECT_EQ(r.answered(), 2u);
  // Bytes after the last answer are no response: refused, not relayed.
  std::string junk;
  EXPECT_FALSE(r.feed("HTTP/1.1 200 OK\r\n\r\n", junk).ok());
}

TEST_P(RelayTest, ChunkedAndLengthBodiesArePipelined) {
  ResponseRelay r;
  for (int i = 0; i < 4; ++i) r.expect({});
  std::string chunked =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n";
  std::string sized = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n01234";
  std::string empty = "HTTP/1.1 204 No Content\r\n\r\n";
  std::string last = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nZ";
  auto f = feed(r, chunked + sized + empty + last, GetParam());
  ASSERT_TRUE(f.state.ok()) << f.state.error().message();
  EXPECT_EQ(f.out, chunked + sized + empty + last);
  EXPECT_EQ(r.answered(), 4u);
  EXPECT_TRUE(r.end().ok());
}

TEST_P(RelayTest, HeadResponsesHaveNoBody) {
  ResponseRelay r;
  r.expect({true, false});
  r.expect({});
  std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
  std::string next = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
  auto f = feed(r, head + next, GetParam());
  ASSERT_TRUE(f.state.ok()) << f.state.error().message();
  EXPECT_EQ(r.answered(), 2u);
}

TEST_P(RelayTest, CloseDelimitedBodyEndsWithTheConnection) {
  ResponseRelay r;
  r.expect({});
  auto f = feed(r, "HTTP/1.0 200 OK\r\n\r\nuntil the end", GetParam());
  ASSERT_TRUE(f.state.ok());
  EXPECT_EQ(r.answered(), 0u);
  EXPECT_TRUE(r.end().ok());
  EXPECT_EQ(r.answered(), 1u);
}

TEST_P(RelayTest, CutAndMalformedResponsesAreErrors) {
  {
    ResponseRelay r;
    r.expect({});
    ASSERT_TRUE(
        feed(r, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", GetParam()).state.ok());
    EXPECT_FALSE(r.end().ok());
  }
  {
    ResponseRelay r;
    r.expect({});
    EXPECT_FALSE(feed(r, "SSH-2.0-OpenSSH\r\n\r\n", GetParam()).state.ok());
  }
  {
    ResponseRelay r;
    r.expect({});
    // Two lengths that disagree: a smuggling attempt, not a response.
    EXPECT_FALSE(
        feed(r, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", GetParam())
            .state.ok());
  }
  {
    ResponseRelay r(256);
    r.expect({});
    EXPECT_FALSE(feed(r, "HTTP/1.1 200 OK\r\nX: " + std::string(1000, 'a') + "\r\n\r\n", GetParam())
                     .state.ok())
        << "a head over the limit";
  }
}

INSTANTIATE_TEST_SUITE_P(WholeAndByteByByte, RelayTest, ::testing::Values(0, 1, 7));

TEST(ClassifyResponse, OnlyA101ToAnUpgradeSwitches) {
  EXPECT_EQ(classifyResponse(100, false), ResponseKind::kInterim);
  EXPECT_EQ(classifyResponse(103, true), ResponseKind::kInterim);
  EXPECT_EQ(classifyResponse(101, true), ResponseKind::kSwitch);
  EXPECT_EQ(classifyResponse(101, false), ResponseKind::kBadSwitch);
  EXPECT_EQ(classifyResponse(200, true), ResponseKind::kFinal);
  EXPECT_EQ(classifyResponse(500, false), ResponseKind::kFinal);
}

}  // namespace
}  // namespace vessel::http
