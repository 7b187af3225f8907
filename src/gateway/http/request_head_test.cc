#include "gateway/http/request_head.h"

#include <gtest/gtest.h>

namespace vessel::gateway::http {
namespace {

using State = ParseResult::State;

ParseResult parse(const std::string& s) { return parseRequestHead(s); }

TEST(RequestHeadTest, OriginForm) {
  auto r = parse("GET /x?y HTTP/1.1\r\nHost: A.test\r\nAccept: */*\r\n\r\nBODY");
  ASSERT_EQ(r.state, State::kDone) << r.error;
  EXPECT_EQ(r.head.method, "GET");
  EXPECT_EQ(r.head.target, "/x?y");
  EXPECT_EQ(r.head.authority.name, "a.test");
  EXPECT_EQ(r.head.body, BodyKind::kNone);
  EXPECT_EQ(r.head.head_bytes, r.head.serialize().size() - 4 + 4);  // same header set
}

TEST(RequestHeadTest, NeedsMoreUntilBlankLine) {
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a.test\r\n").state, State::kNeedMore);
  EXPECT_EQ(parse(std::string(kMaxHeadBytes + 1, 'a')).state, State::kError);
}

TEST(RequestHeadTest, AbsoluteFormMustAgree) {
  EXPECT_EQ(parse("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n").state, State::kDone);
  EXPECT_EQ(parse("GET http://a.test:80/ HTTP/1.1\r\nHost: a.test\r\n\r\n").state, State::kDone);
  EXPECT_EQ(parse("GET http://x.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n").state, State::kError);
  EXPECT_EQ(parse("GET http://a.test:8080/ HTTP/1.1\r\nHost: a.test\r\n\r\n").state, State::kError);
  EXPECT_EQ(parse("GET http://user:pass@x.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n").state,
            State::kError);
  EXPECT_EQ(parse("GET http://a.test@x.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n").state,
            State::kError);
  EXPECT_EQ(parse("GET http://a%2ex.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n").state, State::kError);
  EXPECT_EQ(parse("GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n").state, State::kError);
}

TEST(RequestHeadTest, HostConfusionIsRefused) {
  for (const char* h : {"Host: a.test\r\nHost: x.test\r\n", "Host: a.test@x.test\r\n",
                        "Host: a.test:443@x.test\r\n", "Host: x.test#.a.test\r\n",
                        "Host: a.test\tx.test\r\n", "Host: \r\n", "Host: 1.2.3.4\r\n", ""}) {
    auto r = parse(std::string("GET / HTTP/1.1\r\n") + h + "\r\n");
    EXPECT_EQ(r.state, State::kError) << h;
  }
  EXPECT_EQ(parse("GET / HTTP/1.0\r\n\r\n").state, State::kError);
}

TEST(RequestHeadTest, SmugglingIsRefused) {
  const char* heads[] = {
      "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n",
      "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nContent-Length: 6\r\n",
      "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nContent-Length: 5\r\n",
      "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: gzip, chunked\r\n",
      "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n",
      "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: -1\r\n",
      "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0x10\r\n",
      "POST / HTTP/1.0\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n",
      "GET / HTTP/1.1\r\nHost: a.test\r\nX: y\r\n folded\r\n",
      "GET / HTTP/1.1\r\nHost: a.test\r\nX : y\r\n",
      "GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: h2c\r\nHTTP2-Settings: AA\r\n",
      "GET / HTTP/1.1\r\nHost: a.test\r\nX: a\x01z\r\n",
      "GET  / HTTP/1.1\r\nHost: a.test\r\n",
      "GET / HTTP/2.0\r\nHost: a.test\r\n",
      "CONNECT x.test:443 HTTP/1.1\r\nHost: x.test\r\n",
      "PRI * HTTP/2.0\r\n",
  };
  for (const char* h : heads) {
    EXPECT_EQ(parse(std::string(h) + "\r\n").state, State::kError) << h;
  }
  EXPECT_EQ(parse("GET / HTTP/1.1\nHost: a.test\n\n").state, State::kError);
}

TEST(RequestHeadTest, ContentLengthBody) {
  auto r = parse("POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\n");
  ASSERT_EQ(r.state, State::kDone) << r.error;
  BodyTracker t(r.head);
  EXPECT_EQ(t.consume("abc"), 3u);
  EXPECT_FALSE(t.done());
  EXPECT_EQ(t.consume("deGET"), 2u);
  EXPECT_TRUE(t.done());
}

TEST(RequestHeadTest, ChunkedBody) {
  auto r = parse("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_EQ(r.state, State::kDone) << r.error;
  std::string body = "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nChecksum: x\r\n\r\n";
  std::string next = "GET / HTTP/1.1\r\n";
  for (size_t step : {1u, 4u, 1000u}) {
    BodyTracker t(r.head);
    std::string all = body + next;
    size_t used = 0;
    while (!t.done() && !t.failed() && used < all.size()) {
      used += t.consume(std::string_view(all).substr(used, step));
    }
    EXPECT_TRUE(t.done()) << step;
    EXPECT_EQ(used, body.size()) << step;
  }
  BodyTracker bad(r.head);
  bad.consume("zz\r\n");
  EXPECT_TRUE(bad.failed());
}

TEST(RequestHeadTest, FramingAnUpstreamMayReadDifferentlyIsRefused) {
  const char* heads[] = {
      "GET / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n",
      "HEAD / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n",
      "OPTIONS / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n",
      "TRACE / HTTP/1.1\r\nHost: a.test\r\n",
      "TRACK / HTTP/1.1\r\nHost: a.test\r\n",
      "GET / HTTP/1.1\r\nHost: a.test\r\nX: a\rb\r\n",
      "GET / HTTP/1.1\r\nHost: a.test\rX: b\r\n",
      "GET /\r HTTP/1.1\r\nHost: a.test\r\n",
      "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\nExpect: 200-ok\r\n",
      "GET / HTTP/1.1\r\nHost: a.test\r\nExpect: 100-continue\r\n",
  };
  for (const char* h : heads) {
    EXPECT_EQ(parse(std::string(h) + "\r\n").state, State::kError) << h;
  }
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0\r\n\r\n").state,
            State::kDone);
  auto r = parse(
      "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n"
      "Expect: 100-Continue\r\n\r\n");
  ASSERT_EQ(r.state, State::kDone) << r.error;
  EXPECT_TRUE(r.head.expect_continue);
}

TEST(RequestHeadTest, UpgradeNeedsConnectionUpgrade) {
  auto r = parse("GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\n\r\n");
  ASSERT_EQ(r.state, State::kDone) << r.error;
  EXPECT_FALSE(r.head.upgradeWellFormed());
  r = parse(
      "GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: keep-alive, "
      "Upgrade\r\n\r\n");
  ASSERT_EQ(r.state, State::kDone) << r.error;
  EXPECT_TRUE(r.head.upgradeWellFormed());
}

TEST(RequestHeadTest, ChunkLinesAndTrailersAreStrict) {
  auto r = parse("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_EQ(r.state, State::kDone) << r.error;
  for (const char* body :
       {"5;a\rb\r\nhello\r\n0\r\n\r\n", "5\r\r\nhello\r\n0\r\n\r\n", "5;\x01\r\nhello\r\n0\r\n\r\n",
        "0\r\nno colon\r\n\r\n", "0\r\nContent-Length: 5\r\n\r\n", "0\r\nHost: x.test\r\n\r\n",
        "0\r\n folded\r\n\r\n", "0\r\nX: a\rb\r\n\r\n", "0\r\nX: y\n\r\n"}) {
    BodyTracker t(r.head);
    t.consume(body);
    EXPECT_TRUE(t.failed()) << body;
  }
  BodyTracker ok(r.head);
  std::string payload;
  std::string body = "3\r\nabc\r\n2;x=\"y\"\r\nde\r\n0\r\nX-Sum: 1\r\n\r\n";
  EXPECT_EQ(ok.consume(body, &payload), body.size());
  EXPECT_TRUE(ok.done());
  EXPECT_EQ(payload, "abcde");
  EXPECT_EQ(ok.trailers(), "X-Sum: 1\r\n");
}

TEST(RequestHeadTest, SerializeReplacesHeaders) {
  auto r = parse("GET / HTTP/1.1\r\nHost: a.test\r\nAuthorization: guest\r\n\r\n");
  ASSERT_EQ(r.state, State::kDone);
  r.head.removeHeader("authorization");
  r.head.headers.push_back({"authorization", "Bearer s"});
  EXPECT_EQ(r.head.serialize(),
            "GET / HTTP/1.1\r\nhost: a.test\r\nauthorization: Bearer s\r\n\r\n");
}

}  // namespace
}  // namespace vessel::gateway::http
