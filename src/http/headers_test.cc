#include "http/headers.h"

#include <gtest/gtest.h>

#include <boost/beast/http.hpp>

namespace vessel::http {
namespace {

namespace bh = boost::beast::http;

TEST(ContentDisposition, PlainNamesAreQuotedAndEscaped) {
  EXPECT_EQ(contentDisposition("attachment", "report.txt"), "attachment; filename=\"report.txt\"");
  EXPECT_EQ(contentDisposition("inline", "a \"b\" \\c"), "inline; filename=\"a \\\"b\\\" \\\\c\"");
}

TEST(ContentDisposition, NonAsciiGoesToFilenameStar) {
  EXPECT_EQ(contentDisposition("attachment", "caf\xc3\xa9 1.txt"),
            "attachment; filename=\"caf__ 1.txt\"; filename*=UTF-8''caf%C3%A9%201.txt");
}

// A guest's file name with CR/LF: the response still has one
// Content-Disposition and no field the name made up.
TEST(ContentDisposition, ALineBreakInANameInjectsNoHeader) {
  bh::response<bh::empty_body> res{bh::status::ok, 11};
  setDownloadHeaders(res, "attachment", "x\r\nSet-Cookie: a=b\r\n\r\n<script>");
  std::ostringstream wire;
  wire << res.base();
  std::string head = wire.str();
  EXPECT_EQ(head.find("\r\nSet-Cookie"), std::string::npos) << head;
  EXPECT_EQ(head.find("\r\n\r\n"), head.size() - 4) << head;
  EXPECT_EQ(res[bh::field::content_disposition],
            "attachment; filename=\"x__Set-Cookie: a=b____<script>\"; "
            "filename*=UTF-8''x%0D%0ASet-Cookie%3A%20a%3Db%0D%0A%0D%0A%3Cscript%3E");
  EXPECT_EQ(res["X-Content-Type-Options"], "nosniff");
}

TEST(RequestAuthority, HostOrAbsoluteTarget) {
  bh::request<bh::empty_body> r{bh::verb::get, "/a", 11};
  r.set(bh::field::host, "8000-sb.example:1");
  EXPECT_EQ(*requestAuthority(r), "8000-sb.example:1");
  r.target("http://9000-other.example:1/a?b");
  EXPECT_EQ(*requestAuthority(r), "9000-other.example:1");
  r.target("HTTPS://9000-other.example");
  EXPECT_EQ(*requestAuthority(r), "9000-other.example");
  r.target("ftp://x/");
  EXPECT_FALSE(requestAuthority(r).ok());
  r.target("http://user@x/");
  EXPECT_FALSE(requestAuthority(r).ok());
  r.target("/a");
  r.insert(bh::field::host, "9000-other.example");
  auto two = requestAuthority(r);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.error().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace vessel::http
