#include "http/server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <thread>

namespace vessel::http {
namespace {

using ::testing::HasSubstr;
using tcp = asio::ip::tcp;

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.route(http::verb::get, "/healthz", [](const Request& r) -> asio::awaitable<Response> {
      co_return jsonResponse(r, http::status::ok, R"({"status":"ok"})");
    });
    ASSERT_TRUE(server_.listen({"127.0.0.1", 0}).ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    asio::post(io_, [this] { server_.close(); });
    io_.stop();
    thread_.join();
  }
  // Sends raw bytes and returns the whole response (the server closes or
  // keeps alive; we read one response).
  Response send(const std::string& raw) {
    asio::io_context cio;
    tcp::socket s(cio);
    s.connect({asio::ip::make_address("127.0.0.1"), server_.port()});
    asio::write(s, asio::buffer(raw));
    boost::beast::flat_buffer b;
    Response res;
    http::read(s, b, res);
    return res;
  }

  asio::io_context io_;
  HttpServer server_{io_, ServerLimits{1024, 64, std::chrono::seconds(5)}};
  std::thread thread_;
};

TEST_F(HttpServerTest, RoutesAndUnknownPaths) {
  auto ok = send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ok.result(), http::status::ok);
  EXPECT_EQ(ok.body(), R"({"status":"ok"})");
  auto missing = send("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(missing.result(), http::status::not_found);
  EXPECT_THAT(missing.body(), HasSubstr(R"("code":"not_found")"));
  auto wrong_method = send("DELETE /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(wrong_method.result(), http::status::method_not_allowed);
  EXPECT_EQ(wrong_method[http::field::allow], "GET");
  EXPECT_THAT(wrong_method.body(), HasSubstr("DELETE is not allowed on /healthz"));
}

TEST_F(HttpServerTest, OversizedHeaderAndBodyAreRefused) {
  auto big_header =
      send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n");
  EXPECT_EQ(big_header.result(), http::status::request_header_fields_too_large);
  auto big_body = send("POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" +
                       std::string(100, 'b'));
  EXPECT_EQ(big_body.result(), http::status::payload_too_large);
}

TEST_F(HttpServerTest, GarbageGetsA400) {
  auto r = send("\x16\x03\x01 not http at all\r\n\r\n");
  EXPECT_EQ(r.result(), http::status::bad_request);
  // And the server still serves afterwards.
  EXPECT_EQ(send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").result(), http::status::ok);
}

}  // namespace
}  // namespace vessel::http
