#include "base/byte_reader.h"

#include <gtest/gtest.h>

namespace vessel {
namespace {

TEST(ByteReaderTest, DecodesExplicitByteOrder) {
  std::string d("\x01\x02\x03\x04\x05\x06\x07", 7);
  ByteReader r(d);
  uint16_t le;
  uint32_t be24;
  ASSERT_TRUE(r.readU16le(&le));
  EXPECT_EQ(le, 0x0201);
  ASSERT_TRUE(r.readU24be(&be24));
  EXPECT_EQ(be24, 0x030405u);
  uint32_t x;
  EXPECT_FALSE(r.readU32le(&x));  // only 2 bytes left
  EXPECT_EQ(r.remaining(), 2u);   // a failed read consumes nothing
}

TEST(ByteReaderTest, LengthPrefixRefusesOverlongAndShort) {
  ByteWriter w;
  w.lenPrefixed32("hello");
  std::string enc = w.take();
  std::string_view out;
  ByteReader ok(enc);
  ASSERT_TRUE(ok.readLenPrefixed32(5, &out));
  EXPECT_EQ(out, "hello");
  ByteReader too_long(enc);
  EXPECT_FALSE(too_long.readLenPrefixed32(4, &out));
  EXPECT_EQ(too_long.remaining(), enc.size());
  ByteReader truncated(std::string_view(enc).substr(0, 7));
  EXPECT_FALSE(truncated.readLenPrefixed32(100, &out));
}

}  // namespace
}  // namespace vessel
