#include "gateway/classify.h"

#include <gtest/gtest.h>

#include "gateway/tls/hello_builder.h"

namespace vessel::gateway {
namespace {

using Kind = Classified::Kind;

// Feeds `bytes` in `segment`-byte chunks (0: one chunk) until FirstBytes has
// enough; returns how many chunks it took.
size_t feedAll(FirstBytes& fb, const std::string& bytes, size_t segment = 0) {
  if (segment == 0) segment = bytes.size();
  size_t chunks = 0;
  for (size_t off = 0; off < bytes.size(); off += segment) {
    ++chunks;
    if (fb.feed(std::string_view(bytes).substr(off, segment))) break;
  }
  return chunks;
}

TEST(ClassifyTest, AWholeClientHelloInAnySegmentation) {
  std::string hello = tls::buildClientHello({.server_names = {"a.test"}, .record_size = 9});
  for (size_t seg : {0u, 1u, 7u, 100u}) {
    FirstBytes fb;
    feedAll(fb, hello, seg);
    const Classified& c = fb.result();
    EXPECT_EQ(c.kind, Kind::kTls) << seg;
    ASSERT_TRUE(c.complete) << seg;
    EXPECT_EQ(c.hello.server_names, std::vector<std::string>{"a.test"}) << seg;
    EXPECT_EQ(c.bytes, hello) << "every byte is kept for the upstream";
    EXPECT_FALSE(c.timed_out);
  }
}

TEST(ClassifyTest, APartialHelloWaitsForMore) {
  std::string hello = tls::buildClientHello({.server_names = {"a.test"}});
  FirstBytes fb;
  EXPECT_FALSE(fb.feed(std::string_view(hello).substr(0, hello.size() - 1)));
  EXPECT_FALSE(fb.result().complete);
  EXPECT_EQ(fb.result().kind, Kind::kTls);
  EXPECT_TRUE(fb.feed(std::string_view(hello).substr(hello.size() - 1)));
  EXPECT_TRUE(fb.result().complete);
}

TEST(ClassifyTest, AMalformedHelloEndsClassificationIncomplete) {
  FirstBytes fb;
  EXPECT_TRUE(fb.feed(std::string("\x16\x03\x01\x00\x05hello", 10)));
  EXPECT_EQ(fb.result().kind, Kind::kTls);
  EXPECT_FALSE(fb.result().complete);
}

TEST(ClassifyTest, AnOversizedHelloIsRefusedNotBufferedWithoutLimit) {
  // Threat 21: past the cap the parser refuses; nothing falls back to the
  // destination address.
  std::string big =
      tls::buildClientHello({.server_names = {"a.test"}, .padding = tls::kMaxHelloBytes});
  FirstBytes fb;
  feedAll(fb, big, 1400);
  EXPECT_EQ(fb.result().kind, Kind::kTls);
  EXPECT_FALSE(fb.result().complete);
  EXPECT_LE(fb.result().bytes.size(), kClassifyCap + 1400);
}

TEST(ClassifyTest, AnHttpHeadAcrossSegments) {
  std::string head = "GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n";
  for (size_t seg : {0u, 1u, 5u}) {
    FirstBytes fb;
    feedAll(fb, head, seg);
    const Classified& c = fb.result();
    EXPECT_EQ(c.kind, Kind::kHttp) << seg;
    ASSERT_TRUE(c.complete) << seg;
    EXPECT_EQ(c.head.authority.name, "a.test");
    EXPECT_EQ(c.head.target, "/x");
    EXPECT_EQ(c.bytes, head);
  }
}

TEST(ClassifyTest, AnAmbiguousHeadIsIncomplete) {
  FirstBytes fb;
  EXPECT_TRUE(fb.feed("GET / HTTP/1.1\r\nHost: a.test\r\nHost: x.test\r\n\r\n"));
  EXPECT_EQ(fb.result().kind, Kind::kHttp);
  EXPECT_FALSE(fb.result().complete);
}

TEST(ClassifyTest, AnEndlessHeadStopsAtTheHeadCap) {
  FirstBytes fb;
  std::string line = "X-Pad: " + std::string(1000, 'a') + "\r\n";
  size_t fed = 0;
  bool done = fb.feed("GET / HTTP/1.1\r\n");
  while (!done && fed < 10 * http::kMaxHeadBytes) {
    done = fb.feed(line);
    fed += line.size();
  }
  EXPECT_TRUE(done);
  EXPECT_FALSE(fb.result().complete);
  EXPECT_LE(fb.result().bytes.size(), http::kMaxHeadBytes + line.size() + 16);
}

TEST(ClassifyTest, OpaqueBytesAreDecidedOnTheFirstByte) {
  for (std::string first :
       {std::string("ssh-2.0\r\n"), std::string("\x00\x01", 2), std::string("{}")}) {
    FirstBytes fb;
    EXPECT_TRUE(fb.feed(first));
    EXPECT_EQ(fb.result().kind, Kind::kOpaque) << first;
    EXPECT_FALSE(fb.result().complete);
    EXPECT_TRUE(fb.feed("more")) << "later calls change nothing";
    EXPECT_EQ(fb.result().bytes, first);
  }
}

TEST(ClassifyTest, ATimeoutIsRecorded) {
  FirstBytes fb;
  EXPECT_FALSE(fb.feed("GET / HTTP/1.1\r\n"));
  fb.timeOut();
  Classified c = std::move(fb).take();
  EXPECT_TRUE(c.timed_out);
  EXPECT_EQ(c.kind, Kind::kHttp);
  EXPECT_FALSE(c.complete);
  FirstBytes silent;
  silent.timeOut();
  EXPECT_EQ(silent.result().kind, Kind::kUnknown);
  EXPECT_EQ(kindName(silent.result().kind), "unknown");
}

}  // namespace
}  // namespace vessel::gateway
