// gzip for /files: inflated a bounded piece at a time, bad input refused.
#include "e2b/envd/gzip.h"

#include <gtest/gtest.h>

#include <random>

namespace vessel::e2b::envd {
namespace {

std::string gzipOf(const std::string& data) {
  Gzip gz;
  EXPECT_TRUE(gz.ok());
  return gz.feed(data, true);
}

TEST(EnvdGzip, InflatesInPiecesOfAtMostTheAskedSize) {
  std::mt19937 rng(7);
  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); i += 3) data[i] = static_cast<char>(rng());
  std::string packed = gzipOf(data);
  Inflater in(packed);
  std::string out;
  int pieces = 0;
  while (!in.done()) {
    auto p = in.next(256 << 10);
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_LE(p->size(), 256u << 10);
    out += *p;
    ASSERT_LT(++pieces, 100);
  }
  EXPECT_EQ(out, data);
  EXPECT_GE(pieces, 12);
  auto after = in.next(1024);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty());
}

TEST(EnvdGzip, TruncatedOrForeignBytesAreTheCallersMistake) {
  std::string packed = gzipOf(std::string(100000, 'a') + "tail");
  Inflater cut(std::string_view(packed).substr(0, packed.size() / 2));
  Result<std::string> r = std::string();
  while (r.ok() && !cut.done()) r = cut.next(1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);

  Inflater junk("this is not gzip at all");
  auto j = junk.next(1 << 20);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.error().code(), Code::kInvalidArgument);

  Inflater empty("");
  auto e = empty.next(1 << 20);
  EXPECT_FALSE(e.ok());
}

}  // namespace
}  // namespace vessel::e2b::envd
