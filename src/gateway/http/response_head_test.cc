#include "gateway/http/response_head.h"

#include <gtest/gtest.h>

namespace vessel::gateway::http {
namespace {

using State = ResponseParse::State;

TEST(ResponseHeadTest, FramingFollowsTheRequestAndStatus) {
  auto r = parseResponseHead("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "GET");
  ASSERT_EQ(r.state, State::kDone) << r.error;
  EXPECT_EQ(r.head.status, 200);
  EXPECT_EQ(r.head.body, BodyKind::kLength);
  EXPECT_EQ(r.head.content_length, 5u);
  EXPECT_EQ(r.head.head_bytes, 38u);
  r = parseResponseHead("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD");
  EXPECT_EQ(r.head.body, BodyKind::kNone);
  r = parseResponseHead("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", "GET");
  EXPECT_EQ(r.head.body, BodyKind::kNone);
  r = parseResponseHead("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "GET");
  EXPECT_EQ(r.head.body, BodyKind::kChunked);
  r = parseResponseHead("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n", "GET");
  EXPECT_EQ(r.head.body, BodyKind::kUntilClose);
  EXPECT_EQ(r.head.content_encoding, "gzip");
  r = parseResponseHead("HTTP/1.1 100 Continue\r\n\r\n", "POST");
  EXPECT_TRUE(r.head.interim());
  EXPECT_EQ(r.head.body, BodyKind::kNone);
}

TEST(ResponseHeadTest, UpgradeNeedsBothHeaders) {
  auto r = parseResponseHead(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
      "GET");
  ASSERT_EQ(r.state, State::kDone) << r.error;
  EXPECT_TRUE(r.head.upgrade_websocket && r.head.connection_upgrade);
  r = parseResponseHead("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", "GET");
  EXPECT_FALSE(r.head.connection_upgrade);
}

TEST(ResponseHeadTest, AmbiguousResponsesAreErrors) {
  for (const char* h :
       {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n", "HTTP/2 200\r\n\r\n", "HTTP/1.1 200 OK\r\nX\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", "HTTP/1.1 200 OK\nX: y\r\n\r\n"}) {
    EXPECT_EQ(parseResponseHead(h, "GET").state, State::kError) << h;
  }
  EXPECT_EQ(parseResponseHead("HTTP/1.1 200 OK\r\n", "GET").state, State::kNeedMore);
}

}  // namespace
}  // namespace vessel::gateway::http
