#include "http/server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/json/parse.hpp>
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

// Every answer, the router's own refusals and a client's claimed id
// included, carries an id of the server's making, a new one each time.
TEST_F(HttpServerTest, EveryResponseCarriesItsRequestId) {
  auto a = send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  auto b = send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\n\r\n");
  auto missing = send("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n");
  auto big = send("POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" +
                  std::string(100, 'b'));
  for (const auto* r : {&a, &b, &missing, &big}) {
    std::string id((*r)["X-Request-Id"]);
    EXPECT_THAT(id, ::testing::MatchesRegex("req-[0-9a-f]{16}"));
  }
  EXPECT_NE(a["X-Request-Id"], b["X-Request-Id"]);
  // An error's body names the id too, the router's refusals included.
  auto wrong_method = send("DELETE /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\n\r\n");
  for (const auto* r : {&missing, &wrong_method}) {
    auto body = boost::json::parse(r->body());
    ASSERT_TRUE(body.is_object()) << r->body();
    const auto* id = body.as_object().if_contains("request_id");
    ASSERT_NE(id, nullptr) << r->body();
    EXPECT_EQ(id->as_string(), std::string((*r)["X-Request-Id"])) << r->body();
  }
  EXPECT_NE(wrong_method["X-Request-Id"], "mine");
}

}  // namespace
}  // namespace vessel::http
