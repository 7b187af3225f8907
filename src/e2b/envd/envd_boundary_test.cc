// envd's listener as a boundary (issue 25), against the real agent run on
// the host: a signed URL names its sandbox and is checked from the head, and
// a guest's file name never becomes a header of a download.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "agentclient/testing/agent_harness.h"
#include "e2b/envd/envd.h"
#include "e2b/envd/envd_fixture_test.h"
#include "e2b/envd/signature.h"
#include "e2b/envd/test_client.h"

namespace vessel::e2b::envd {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using agentclient::testing::runFor;
using ::testing::HasSubstr;

// The envd fixture's server and agent; requests here carry no body type.
class EnvdBoundaryTest : public fixture::EnvdTest {
 protected:
  std::string headers(const std::string& method, const std::string& target) {
    return method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nE2b-Sandbox-Id: sb-1\r\n" +
           "X-Access-Token: " + tokens_.forSandbox("sb-1") + "\r\n";
  }
};

// A signed URL that names no sandbox is refused without any per-sandbox
// work: no live sandbox's token is tried (the HMAC per live sandbox of
// before), for a download or an upload, whose body is never read.
TEST_F(EnvdBoundaryTest, ASignedUrlNamingNoSandboxIsRefusedUnread) {
  std::string path = dir_ + "/nameless.txt";
  std::string sig = fileSignature(path, "read", "root", tokens_.forSandbox("sb-1"), std::nullopt);
  std::string enc;
  for (char c : sig) enc += c == '+' ? "%2B" : c == '/' ? "%2F" : std::string(1, c);
  auto get = runFor(io_,
                    request(server_.port(),
                            "GET /files?path=" + path + "&username=root&signature=" + enc +
                                " HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                            ""),
                    20s);
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->status, 400) << get->body;
  EXPECT_THAT(get->body, HasSubstr("names its sandbox"));
  // An upload naming none, or with a signature that is not its sandbox's:
  // answered from the head, the body left unread.
  std::string wsig = fileSignature(path, "write", "root", tokens_.forSandbox("sb-0"), std::nullopt);
  std::string wenc;
  for (char c : wsig) wenc += c == '+' ? "%2B" : c == '/' ? "%2F" : std::string(1, c);
  // The head announces 4 MiB and none of it is sent: an answer at all
  // shows the body was not waited for.
  for (std::string host : {std::string("127.0.0.1"), std::string("49983-sb-1.vessel.test")}) {
    std::string head =
        "POST /files?path=" + path + "&username=root&signature=" + wenc +
        " HTTP/1.1\r\nHost: " + host +
        "\r\nContent-Type: application/octet-stream\r\nContent-Length: " + std::to_string(4 << 20) +
        "\r\n\r\n";
    auto put = runFor(
        io_,
        [](uint16_t port, std::string head) -> asio::awaitable<Result<int>> {
          auto ex = co_await asio::this_coro::executor;
          asio::ip::tcp::socket s(ex);
          auto [cec] = co_await s.async_connect({asio::ip::make_address("127.0.0.1"), port},
                                                asio::as_tuple(asio::use_awaitable));
          if (cec) co_return Error(Code::kUnavailable, "connect: " + cec.message());
          auto [wec, wn] = co_await asio::async_write(s, asio::buffer(head),
                                                      asio::as_tuple(asio::use_awaitable));
          if (wec) co_return Error(Code::kUnavailable, "write: " + wec.message());
          std::string raw;
          char buf[4096];
          while (raw.size() < 12) {
            auto [ec, n] =
                co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
            raw.append(buf, n);
            if (ec) break;
          }
          if (raw.size() < 12) co_return Error(Code::kProtocol, "no answer: " + raw);
          co_return std::stoi(raw.substr(9, 3));
        }(server_.port(), head),
        20s);
    ASSERT_TRUE(put.ok()) << put.error().message();
    EXPECT_EQ(*put, host == "127.0.0.1" ? 400 : 401);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(live_asked_, 0);
}

// A guest's file name with CR/LF never becomes a header of the download:
// RFC 6266 quoting with filename*, and nosniff.
TEST_F(EnvdBoundaryTest, ALineBreakInAFileNameInjectsNoHeader) {
  std::string name = "evil\r\nSet-Cookie: stolen=1\r\nX-Injected: yes";
  std::string path = dir_ + "/" + name;
  { std::ofstream(path) << "payload"; }
  std::string enc;
  for (unsigned char c : path) {
    char hex[4];
    std::snprintf(hex, sizeof hex, "%%%02X", c);
    enc += std::isalnum(c) || c == '/' || c == '-' || c == '.' ? std::string(1, c) : hex;
  }
  auto down = runFor(
      io_, request(server_.port(), headers("GET", "/files?username=root&path=" + enc), ""), 20s);
  ASSERT_TRUE(down.ok()) << down.error().message();
  EXPECT_EQ(down->status, 200) << down->body;
  EXPECT_EQ(down->body, "payload");
  EXPECT_EQ(down->headers.count("set-cookie"), 0u);
  EXPECT_EQ(down->headers.count("x-injected"), 0u);
  EXPECT_EQ(down->headers["x-content-type-options"], "nosniff");
  EXPECT_THAT(down->headers["content-disposition"], HasSubstr("filename*=UTF-8''evil%0D%0A"));
}

}  // namespace
}  // namespace vessel::e2b::envd
