// The router on a real HttpServer, driven by raw requests over TCP: its own
// 404 and 405 (with Allow), typed parameters handed to handlers, malformed
// parameters refused before any handler runs, guards and error renderers.
#include "http/router.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <thread>

#include "http/server.h"

namespace vessel::http {
namespace {

using ::testing::HasSubstr;
using tcp = asio::ip::tcp;

Response text(const Request& req, std::string body) {
  Response res{status::ok, req.version()};
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Router& r = server_.router();
    r.paramType("thing", [](std::string_view v) -> Status {
      if (v.size() > 8 || v.find_first_not_of("abcdefghijklmnopqrstuvwxyz-") != v.npos)
        return Error(Code::kInvalidArgument, "bad thing id");
      return okStatus();
    });
    r.get("/v1/things", [this](const Request& q, const Params&) -> asio::awaitable<Response> {
      ++calls_;
      co_return text(q, "list");
    });
    r.post("/v1/things", [this](const Request& q, const Params&) -> asio::awaitable<Response> {
      ++calls_;
      co_return text(q, "made " + q.body());
    });
    r.get("/v1/things/{id:thing}",
          [this](const Request& q, const Params& p) -> asio::awaitable<Response> {
            ++calls_;
            co_return text(q, "thing " + p["id"]);
          });
    r.del("/v1/things/{id:thing}",
          [this](const Request& q, const Params& p) -> asio::awaitable<Response> {
            ++calls_;
            co_return text(q, "gone " + p["id"]);
          });
    r.post("/v1/things/{id:thing}:poke",
           [this](const Request& q, const Params& p) -> asio::awaitable<Response> {
             ++calls_;
             co_return text(q, "poked " + p["id"]);
           });
    r.get("/v1/things/{id:thing}/parts/{n:uint}",
          [this](const Request& q, const Params& p) -> asio::awaitable<Response> {
            ++calls_;
            // A typed number: arithmetic on it, not on its text.
            co_return text(q, p["id"] + " part " + std::to_string(p.number("n") + 1));
          });
    // A front end of its own under /other/: its error format and its guard.
    r.errorsUnder("/other/", [](const Request& q, const Error& e) {
      Response res{statusForCode(e.code()), q.version()};
      res.body() = "OTHER " + e.message();
      res.prepare_payload();
      return res;
    });
    r.guardUnder("/other/", [](const Request& q) -> std::optional<Response> {
      if (q[field::authorization] == "yes") return std::nullopt;
      Response res{status::unauthorized, q.version()};
      res.body() = "who are you";
      res.prepare_payload();
      return res;
    });
    r.get("/other/x", [this](const Request& q, const Params&) -> asio::awaitable<Response> {
      ++calls_;
      co_return text(q, "x");
    });
    ASSERT_TRUE(server_.listen({"127.0.0.1", 0}).ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    asio::post(io_, [this] { server_.close(); });
    io_.stop();
    thread_.join();
  }
  Response send(const std::string& method, const std::string& target,
                const std::string& extra = "") {
    asio::io_context cio;
    tcp::socket s(cio);
    s.connect({asio::ip::make_address("127.0.0.1"), server_.port()});
    std::string raw = method + " " + target + " HTTP/1.1\r\nHost: x\r\n" + extra +
                      "Content-Length: 0\r\nConnection: close\r\n\r\n";
    asio::write(s, asio::buffer(raw));
    boost::beast::flat_buffer b;
    Response res;
    read(s, b, res);
    return res;
  }

  asio::io_context io_;
  HttpServer server_{io_};
  std::thread thread_;
  std::atomic<int> calls_{0};
};

TEST_F(RouterTest, RoutesByMethodAndPatternAndHandsTypedParams) {
  EXPECT_EQ(send("GET", "/v1/things").body(), "list");
  EXPECT_EQ(send("GET", "/v1/things/abc").body(), "thing abc");
  EXPECT_EQ(send("DELETE", "/v1/things/abc").body(), "gone abc");
  EXPECT_EQ(send("POST", "/v1/things/abc:poke").body(), "poked abc");
  EXPECT_EQ(send("GET", "/v1/things/abc/parts/41").body(), "abc part 42");
  // The query is not part of the path.
  EXPECT_EQ(send("GET", "/v1/things/abc?x=1").body(), "thing abc");
  EXPECT_EQ(calls_.load(), 6);
}

TEST_F(RouterTest, UnknownPathsAre404) {
  for (const char* path :
       {"/nope", "/v1/things/abc/extra", "/v1/things//", "/v1//things", "/v1/things/abc/parts"}) {
    auto r = send("GET", path);
    EXPECT_EQ(r.result(), status::not_found) << path;
    EXPECT_THAT(r.body(), HasSubstr(R"("code":"not_found")")) << path;
  }
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(RouterTest, WrongMethodIs405WithAllow) {
  auto r = send("PUT", "/v1/things");
  EXPECT_EQ(r.result(), status::method_not_allowed);
  EXPECT_EQ(r[field::allow], "GET, POST");
  EXPECT_THAT(r.body(), HasSubstr("PUT is not allowed on /v1/things"));
  auto one = send("POST", "/v1/things/abc");
  EXPECT_EQ(one.result(), status::method_not_allowed);
  EXPECT_EQ(one[field::allow], "GET, DELETE");
  auto suffix = send("GET", "/v1/things/abc:poke");
  EXPECT_EQ(suffix.result(), status::method_not_allowed);
  EXPECT_EQ(suffix[field::allow], "POST");
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(RouterTest, MalformedParamsAreRefusedBeforeTheHandler) {
  // The parameter's type says why (400, its own message).
  auto bad = send("GET", "/v1/things/ABC");
  EXPECT_EQ(bad.result(), status::bad_request);
  EXPECT_THAT(bad.body(), HasSubstr("bad thing id"));
  EXPECT_EQ(send("GET", "/v1/things/waytoolongname").result(), status::bad_request);
  // "uint": decimal digits only, no sign, no overflow.
  for (const char* n : {"x1", "-1", "1.5", "99999999999999999999", "0x10"}) {
    auto r = send("GET", std::string("/v1/things/abc/parts/") + n);
    EXPECT_EQ(r.result(), status::bad_request) << n;
    EXPECT_THAT(r.body(), HasSubstr("n must be a decimal number")) << n;
  }
  // Nothing is decoded: a percent-encoded segment is not a parameter.
  EXPECT_EQ(send("GET", "/v1/things/a%2Fb").result(), status::bad_request);
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(RouterTest, GuardAndRendererOfAPrefix) {
  // Unauthenticated: the guard answers, whether or not the path exists.
  EXPECT_EQ(send("GET", "/other/nope").body(), "who are you");
  EXPECT_EQ(send("DELETE", "/other/x").body(), "who are you");
  // Authenticated: the router's refusals in the prefix's own format.
  auto missing = send("GET", "/other/nope", "Authorization: yes\r\n");
  EXPECT_EQ(missing.result(), status::not_found);
  EXPECT_THAT(missing.body(), HasSubstr("OTHER no such endpoint: /other/nope"));
  auto wrong = send("DELETE", "/other/x", "Authorization: yes\r\n");
  EXPECT_EQ(wrong.result(), status::method_not_allowed);
  EXPECT_EQ(wrong[field::allow], "GET");
  EXPECT_THAT(wrong.body(), HasSubstr("OTHER DELETE is not allowed"));
  // A matched route is its handler's: the guard does not run for it.
  EXPECT_EQ(send("GET", "/other/x").body(), "x");
  EXPECT_EQ(calls_.load(), 1);
}

}  // namespace
}  // namespace vessel::http
