#include "e2b/envd/multipart.h"

#include <gtest/gtest.h>

namespace vessel::e2b::envd {
namespace {

std::string body(const std::string& b) {
  return "--" + b +
         "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a/b.txt\"\r\n"
         "Content-Type: application/octet-stream\r\n\r\nhello\r\nworld\r\n--" +
         b + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/c\"\r\n\r\n\r\n--" +
         b + "--\r\n";
}

TEST(MultipartTest, ParsesFilesWithNamesAndBinaryContent) {
  auto b = multipartBoundary("multipart/form-data; boundary=----formdata-undici-0123");
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(*b, "----formdata-undici-0123");
  auto parts = parseMultipart(body(*b), *b);
  ASSERT_TRUE(parts.ok()) << parts.error().message();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].name, "file");
  EXPECT_EQ((*parts)[0].filename, "a/b.txt");
  EXPECT_EQ((*parts)[0].data, "hello\r\nworld");
  EXPECT_EQ((*parts)[1].filename, "/c");
  EXPECT_EQ((*parts)[1].data, "");
}

TEST(MultipartTest, QuotedBoundaryAndEscapes) {
  auto b = multipartBoundary("Multipart/Form-Data; charset=x; boundary=\"a b\"");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, "a b");
  std::string in =
      "--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"q\\\"x\"\r\n\r\n1\r\n--x--";
  auto parts = parseMultipart(in, "x");
  ASSERT_TRUE(parts.ok()) << parts.error().message();
  EXPECT_EQ((*parts)[0].filename, "q\"x");
}

TEST(MultipartTest, RefusesMalformedBodies) {
  EXPECT_FALSE(multipartBoundary("application/json").ok());
  EXPECT_FALSE(multipartBoundary("multipart/form-data").ok());
  EXPECT_FALSE(multipartBoundary("multipart/form-data; boundary=" + std::string(71, 'a')).ok());
  const std::string b = "B";
  // No closing delimiter, headers that never end, no disposition, junk after a boundary.
  EXPECT_FALSE(
      parseMultipart("--B\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nabc", b).ok());
  EXPECT_FALSE(parseMultipart("--B\r\nContent-Disposition: form-data", b).ok());
  EXPECT_FALSE(parseMultipart("--B\r\nX: y\r\n\r\nabc\r\n--B--", b).ok());
  EXPECT_FALSE(parseMultipart("--Bjunk\r\n", b).ok());
  EXPECT_FALSE(parseMultipart("nothing here", b).ok());
  std::string many;
  for (size_t i = 0; i <= kMaxParts; ++i)
    many += "--B\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n";
  many += "--B--";
  EXPECT_FALSE(parseMultipart(many, b).ok());
}

}  // namespace
}  // namespace vessel::e2b::envd
