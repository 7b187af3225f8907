#include "agentproto/frame.h"

#include <gtest/gtest.h>

namespace vessel::agentproto {
namespace {

TEST(FrameTest, RoundTripsAcrossArbitrarySplits) {
  std::string wire = encodeFrame(MsgType::kPing, 7, "abc") +
                     encodeFrame(MsgType::kHello, 0, encodeHello({1, 1, "v"}));
  for (size_t split = 0; split <= wire.size(); ++split) {
    FrameDecoder d;
    ASSERT_TRUE(d.feed(std::string_view(wire).substr(0, split)).ok());
    std::vector<Frame> got;
    auto drain = [&] {
      for (;;) {
        auto f = d.next();
        ASSERT_TRUE(f.ok());
        if (!f->has_value()) break;
        got.push_back(std::move(**f));
      }
    };
    drain();
    ASSERT_TRUE(d.feed(std::string_view(wire).substr(split)).ok());
    drain();
    ASSERT_EQ(got.size(), 2u) << "split at " << split;
    EXPECT_EQ(got[0].type, MsgType::kPing);
    EXPECT_EQ(got[0].stream, 7u);
    EXPECT_EQ(got[0].payload, "abc");
    auto h = decodeHello(got[1].payload);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->agent_version, "v");
  }
}

TEST(FrameTest, OversizedLengthFailsBeforeBuffering) {
  std::string hdr("\xff\xff\xff\x7f\x01\x00\x00\x00\x00\x00\x00\x00", 12);
  FrameDecoder d;
  ASSERT_TRUE(d.feed(hdr).ok());
  auto f = d.next();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().code(), Code::kProtocol);
  // The decoder stays failed: a channel that lied once is not trusted.
  EXPECT_FALSE(d.feed(encodeFrame(MsgType::kPing, 0, "")).ok());
}

TEST(FrameTest, NonZeroFlagsRejected) {
  std::string w = encodeFrame(MsgType::kPing, 0, "");
  w[6] = 1;
  FrameDecoder d;
  ASSERT_TRUE(d.feed(w).ok());
  EXPECT_FALSE(d.next().ok());
}

TEST(FrameTest, HelloValidation) {
  EXPECT_FALSE(decodeHello("").ok());
  EXPECT_FALSE(decodeHello(encodeHello({2, 1, "x"})).ok());  // min > max
  std::string trailing = encodeHello({1, 1, "x"}) + "z";
  EXPECT_FALSE(decodeHello(trailing).ok());
  std::string bad_magic = encodeHello({1, 1, "x"});
  bad_magic[0] ^= 1;
  EXPECT_FALSE(decodeHello(bad_magic).ok());
}

}  // namespace
}  // namespace vessel::agentproto
