#include "e2b/envd/connect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vessel::e2b::envd {
namespace {

using ::testing::HasSubstr;

TEST(ConnectEnvelopeTest, EncodesFlagsAndBigEndianLength) {
  std::string e = encodeEnvelope(0, std::string(258, 'x'));
  ASSERT_EQ(e.size(), 5u + 258);
  EXPECT_EQ(e[0], 0);
  EXPECT_EQ(static_cast<uint8_t>(e[3]), 1);
  EXPECT_EQ(static_cast<uint8_t>(e[4]), 2);
}

TEST(ConnectEnvelopeTest, DecodesAcrossArbitrarySplits) {
  std::string wire = encodeEnvelope(0, "{\"a\":1}") + encodeEnvelope(kFlagEndStream, "{}");
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    EnvelopeDecoder d;
    ASSERT_TRUE(d.feed(wire.substr(0, cut)).ok());
    std::vector<Envelope> got;
    for (;;) {
      auto e = d.next();
      ASSERT_TRUE(e.ok());
      if (!*e) break;
      got.push_back(std::move(**e));
    }
    ASSERT_TRUE(d.feed(wire.substr(cut)).ok());
    for (;;) {
      auto e = d.next();
      ASSERT_TRUE(e.ok());
      if (!*e) break;
      got.push_back(std::move(**e));
    }
    ASSERT_EQ(got.size(), 2u) << cut;
    EXPECT_EQ(got[0].data, "{\"a\":1}");
    EXPECT_EQ(got[1].flags, kFlagEndStream);
    EXPECT_EQ(got[1].data, "{}");
  }
}

TEST(ConnectEnvelopeTest, RefusesOversizedCompressedAndUnknownFlags) {
  EnvelopeDecoder d(16);
  std::string big = encodeEnvelope(0, std::string(17, 'x'));
  ASSERT_TRUE(d.feed(big.substr(0, 5)).ok());
  auto e = d.next();
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code(), Code::kResourceExhausted);

  EnvelopeDecoder c;
  ASSERT_TRUE(c.feed(encodeEnvelope(kFlagCompressed, "x")).ok());
  EXPECT_FALSE(c.next().ok());
  EnvelopeDecoder u;
  ASSERT_TRUE(u.feed(encodeEnvelope(0x80, "x")).ok());
  EXPECT_FALSE(u.next().ok());
  // Unread bytes are bounded too.
  EnvelopeDecoder b(16);
  EXPECT_FALSE(b.feed(std::string(1 << 20, 'x')).ok());
}

TEST(ConnectEnvelopeTest, ServerStreamRequestIsExactlyOneMessage) {
  auto one = singleRequestMessage(encodeEnvelope(0, "{}"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, "{}");
  EXPECT_FALSE(singleRequestMessage("").ok());
  EXPECT_FALSE(singleRequestMessage(encodeEnvelope(0, "{}") + encodeEnvelope(0, "{}")).ok());
  EXPECT_FALSE(singleRequestMessage(encodeEnvelope(kFlagEndStream, "{}")).ok());
  EXPECT_FALSE(singleRequestMessage(encodeEnvelope(0, "{}").substr(0, 6)).ok());
}

TEST(ConnectEnvelopeTest, EndOfStreamCarriesConnectCodeNames) {
  std::string ok = endStreamEnvelope(nullptr);
  EXPECT_EQ(ok[0], kFlagEndStream);
  EXPECT_EQ(ok.substr(5), "{}");
  Error e(Code::kNotFound, "process with pid 7 not found");
  std::string err = endStreamEnvelope(&e);
  EXPECT_THAT(err.substr(5), HasSubstr("\"code\":\"not_found\""));
  EXPECT_THAT(err.substr(5), HasSubstr("pid 7"));
  EXPECT_EQ(connectCode(Code::kAlreadyExists), "already_exists");
  EXPECT_EQ(connectCode(Code::kDeadlineExceeded), "deadline_exceeded");
  EXPECT_EQ(connectCode(Code::kUnavailable), "unavailable");
  EXPECT_EQ(connectCode(Code::kInvalidArgument), "invalid_argument");
  EXPECT_EQ(connectHttpStatus(Code::kNotFound), 404);
  EXPECT_EQ(connectHttpStatus(Code::kUnauthenticated), 401);
}

}  // namespace
}  // namespace vessel::e2b::envd
