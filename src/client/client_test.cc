// The client against a real HTTP server (the API's HttpServer on a
// loopback port): JSON calls, errors, event streams, and the failures a CLI
// meets (nothing listening, a server that never answers).
#include "client/client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "http/server.h"
#include "http/testing/test_pki.h"
#include "http/tls.h"

namespace vessel::client {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using http::Request;
using http::Response;
using ::testing::HasSubstr;

// Writes raw bytes as the whole response (the stream closes afterwards).
asio::awaitable<std::optional<Response>> writeRaw(boost::beast::tcp_stream& s, std::string raw) {
  co_await asio::async_write(s, asio::buffer(raw), asio::use_awaitable);
  boost::system::error_code ec;
  s.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  co_return std::nullopt;
}

// Headers, then silence with the connection open.
asio::awaitable<std::optional<Response>> holdOpen(boost::beast::tcp_stream& s) {
  std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
  co_await asio::async_write(s, asio::buffer(head), asio::use_awaitable);
  asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::seconds(60));
  co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return std::nullopt;
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.route(http::verb::get, "/v1/echo", [](const Request& r) -> asio::awaitable<Response> {
      json::object o{{"auth", std::string(r[http::field::authorization])},
                     {"target", std::string(r.target())}};
      co_return http::jsonResponse(r, http::status::ok, json::serialize(o));
    });
    server_.route(http::verb::post, "/v1/echo", [](const Request& r) -> asio::awaitable<Response> {
      co_return http::jsonResponse(r, http::status::created, r.body());
    });
    server_.route(
        http::verb::delete_, "/v1/thing", [](const Request& r) -> asio::awaitable<Response> {
          co_return http::errorResponse(r, Error(Code::kFailedPrecondition, "thing is busy"),
                                        json::object{{"state", "paused"}});
        });
    server_.route(http::verb::get, "/v1/plain", [](const Request& r) -> asio::awaitable<Response> {
      Response res{http::status::bad_gateway, r.version()};
      res.body() = "upstream went away";
      res.prepare_payload();
      co_return res;
    });
    server_.router().addStream(
        http::verb::get, "/v1/sse/{kind}",
        [](const Request& r, const http::Params&, boost::beast::tcp_stream& s) {
          std::string body = ": keepalive\n\nid: 1\nevent: operation.running\ndata: {\"n\":1}\n\n";
          body += "id: 2\r\nevent: operation.done\r\ndata: {\"n\":\r\ndata: 2}\r\n\r\n";
          if (r.target() == "/v1/sse/plain")  // body until the connection closes
            return writeRaw(s, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + body);
          if (r.target() == "/v1/sse/chunked") {
            std::string chunked;
            for (size_t i = 0; i < body.size(); i += 7) {
              std::string part = body.substr(i, 7);
              char len[16];
              std::snprintf(len, sizeof len, "%zx\r\n", part.size());
              chunked += len + part + "\r\n";
            }
            return writeRaw(s,
                            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                            "Transfer-Encoding: chunked\r\n\r\n" +
                                chunked + "0\r\n\r\n");
          }
          if (r.target() == "/v1/sse/last") {
            std::string id(r["Last-Event-ID"]);
            return writeRaw(s, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: " +
                                   id + "\n\n");
          }
          if (r.target() == "/v1/sse/silent") return holdOpen(s);
          if (r.target() == "/v1/sse/json")
            return writeRaw(s,
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            "Content-Length: 2\r\n\r\n{}");
          auto res =
              http::errorResponse(r, Error(Code::kNotFound, "operation op-x does not exist"));
          return [](Response res) -> asio::awaitable<std::optional<Response>> {
            co_return res;
          }(std::move(res));
        });
    ASSERT_TRUE(server_.listen({"127.0.0.1", 0}).ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    asio::post(io_, [this] { server_.close(); });
    io_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  Client client(std::string token = "vsk_test") {
    ClientOptions o;
    o.url = url();
    o.token = std::move(token);
    o.timeout = std::chrono::seconds(10);
    return Client(o);
  }

  asio::io_context io_;
  http::HttpServer server_{io_};
  std::thread thread_;
};

TEST(ParseUrl, Forms) {
  auto a = parseUrl("http://127.0.0.1:8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8080);
  EXPECT_EQ(a->base_path, "");
  auto b = parseUrl("http://localhost/vessel/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "localhost");
  EXPECT_EQ(b->port, 80);
  EXPECT_EQ(b->base_path, "/vessel");
  auto c = parseUrl("http://[::1]:9000");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 9000);
  auto d = parseUrl("https://vessel.example");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->tls);
  EXPECT_EQ(d->port, 443);
  EXPECT_FALSE(a->tls);
  for (const char* bad : {"ftp://x", "127.0.0.1:8080", "http://", "https://", "http://h:0",
                          "http://h:99999", "http://u:p@h:1", "http://h:12x"})
    EXPECT_FALSE(parseUrl(bad).ok()) << bad;
}

TEST(OptionsFromEnv, KeyFromEnvironmentOrDevKeyFile) {
  std::string dir = ::testing::TempDir() + "/client-env-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/dev-api-key") << "vsk_from_file\n";
  ::setenv("VESSEL_STATE_DIR", dir.c_str(), 1);
  ::setenv("VESSEL_API_URL", "http://127.0.0.1:1234", 1);
  ::unsetenv("VESSEL_API_KEY");
  auto o = optionsFromEnv();
  EXPECT_EQ(o.url, "http://127.0.0.1:1234");
  EXPECT_EQ(o.token, "vsk_from_file");
  EXPECT_EQ(o.ca_file, "");
  ::setenv("VESSEL_API_KEY", "vsk_from_env", 1);
  ::setenv("VESSEL_CA_FILE", "/etc/vessel/tls-ca.pem", 1);
  EXPECT_EQ(optionsFromEnv().token, "vsk_from_env");
  EXPECT_EQ(optionsFromEnv().ca_file, "/etc/vessel/tls-ca.pem");
  ::unsetenv("VESSEL_CA_FILE");
  ::unsetenv("VESSEL_API_KEY");
  ::unsetenv("VESSEL_API_URL");
  ::unsetenv("VESSEL_STATE_DIR");
  std::filesystem::remove_all(dir);
}

TEST_F(ClientTest, JsonCallsCarryTheKeyAndTheBody) {
  auto c = client();
  auto g = c.get("/v1/echo?x=1");
  ASSERT_TRUE(g.ok()) << g.error().message();
  EXPECT_EQ(str(*g, "auth"), "Bearer vsk_test");
  EXPECT_EQ(str(*g, "target"), "/v1/echo?x=1");
  json::value body = json::object{{"count", 3}, {"name", "x"}};
  auto p = c.post("/v1/echo", body);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(num(*p, "count"), 3);
  EXPECT_EQ(str(*p, "name"), "x");
  EXPECT_EQ(str(*p, "absent"), "");
  EXPECT_EQ(field(*p, "absent"), nullptr);
}

TEST_F(ClientTest, UrlPrefixIsPrepended) {
  ClientOptions o;
  o.url = url() + "/v1/";
  Client c(o);
  auto g = c.get("/echo");
  ASSERT_TRUE(g.ok()) << g.error().message();
  EXPECT_EQ(str(*g, "target"), "/v1/echo");
  EXPECT_EQ(str(*g, "auth"), "");  // no token, no header
}

TEST_F(ClientTest, ServerErrorsKeepTheirCodeAndMessage) {
  auto c = client();
  auto d = c.del("/v1/thing");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(d.error().message(), "thing is busy");
  auto missing = c.get("/v1/nowhere");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kNotFound);
  // Not our JSON: the status decides and the text is shown.
  auto plain = c.get("/v1/plain");
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.error().code(), Code::kProtocol);
  EXPECT_THAT(plain.error().message(), HasSubstr("502: upstream went away"));
  // request() returns the status instead of judging it.
  auto raw = c.request("DELETE", "/v1/thing");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->status, 409u);
  EXPECT_THAT(raw->body, HasSubstr("\"state\":\"paused\""));
}

TEST_F(ClientTest, UnreachableServerSaysWhere) {
  // A port that was just free: nothing listens on it.
  asio::io_context io;
  asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
  uint16_t port = a.local_endpoint().port();
  a.close();
  ClientOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(port);
  Client c(o);
  auto r = c.get("/v1/sandboxes");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
  EXPECT_THAT(r.error().message(), HasSubstr("cannot reach the Vessel API at " + o.url));
  EXPECT_THAT(r.error().message(), HasSubstr("refused"));
  Client bad(ClientOptions{.url = "ftp://x"});
  EXPECT_EQ(bad.get("/").error().code(), Code::kInvalidArgument);
}

TEST_F(ClientTest, ServerThatNeverAnswersTimesOut) {
  // Listening, never accepting: the kernel completes the handshake and
  // takes the request, and no answer ever comes.
  asio::io_context io;
  asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
  ClientOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(a.local_endpoint().port());
  o.timeout = std::chrono::milliseconds(200);
  Client c(o);
  auto r = c.get("/v1/sandboxes");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDeadlineExceeded);
  EXPECT_THAT(r.error().message(), HasSubstr("no answer within"));
}

TEST_F(ClientTest, EventStreamsPlainAndChunked) {
  for (const char* path : {"/v1/sse/plain", "/v1/sse/chunked"}) {
    auto c = client();
    auto s = c.stream("GET", path);
    ASSERT_TRUE(s.ok()) << path << ": " << s.error().message();
    std::vector<SseEvent> got;
    for (;;) {
      auto e = s->next();
      ASSERT_TRUE(e.ok()) << path << ": " << e.error().message();
      if (!e->has_value()) break;
      got.push_back(**e);
    }
    ASSERT_EQ(got.size(), 2u) << path;
    EXPECT_EQ(got[0].type, "operation.running");
    EXPECT_EQ(got[0].data, "{\"n\":1}");
    EXPECT_EQ(got[1].id, "2");
    EXPECT_EQ(got[1].type, "operation.done");
    auto v = parseJson(got[1].data);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(num(*v, "n"), 2);
    EXPECT_EQ(s->lastEventId(), "2");
    // Once ended it stays ended.
    auto again = s->next();
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again->has_value());
  }
}

TEST_F(ClientTest, EventStreamSendsHeadersAndReportsErrors) {
  auto c = client();
  auto s = c.stream("GET", "/v1/sse/last", "", {{"Last-Event-ID", "41"}});
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto e = s->next();
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->data, "41");

  auto missing = c.stream("GET", "/v1/sse/unknown");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kNotFound);
  EXPECT_EQ(missing.error().message(), "operation op-x does not exist");

  auto not_sse = c.stream("GET", "/v1/sse/json");
  ASSERT_FALSE(not_sse.ok());
  EXPECT_EQ(not_sse.error().code(), Code::kProtocol);
}

TEST_F(ClientTest, SilentStreamHitsTheIdleTimeout) {
  auto c = client();
  auto s = c.stream("GET", "/v1/sse/silent", "", {}, std::chrono::milliseconds(200));
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto e = s->next();
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code(), Code::kDeadlineExceeded);
  EXPECT_THAT(e.error().message(), HasSubstr("GET /v1/sse/silent: nothing received"));
}

// https:// against the one HTTP server with TLS on (http/tls.h) and a
// real certificate: verified with ca_file (VESSEL_CA_FILE, the CLI's
// --ca-file), refused with a clear message against another CA or the
// system's store, event streams and all.
class ClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/client-tls-" + std::to_string(::getpid());
    ASSERT_TRUE(http::testing::makeTestPki(dir_ + "/a", "ca-a", "vessel", "IP:127.0.0.1", &a_));
    ASSERT_TRUE(http::testing::makeTestPki(dir_ + "/b", "ca-b", "vessel", "IP:127.0.0.1", &b_));
    auto ctx = http::serverContextFromFiles(a_.cert, a_.key);
    ASSERT_TRUE(ctx.ok()) << ctx.error().message();
    server_.route(http::verb::get, "/v1/echo", [](const Request& r) -> asio::awaitable<Response> {
      json::object o{{"auth", std::string(r[http::field::authorization])}};
      co_return http::jsonResponse(r, http::status::ok, json::serialize(o));
    });
    server_.router().addStream(
        http::verb::get, "/v1/sse",
        [](const Request&, const http::Params&, boost::beast::tcp_stream& s) {
          return writeRaw(s,
                          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
                          "event: one\ndata: {}\n\n");
        });
    auto t = http::TlsTerminator::create(threads_, [c = *ctx](const std::string&) { return c; });
    ASSERT_TRUE(t.ok());
    tls_ = std::move(*t);
    tls_->install(server_, http::TlsMode::kOnly);
    ASSERT_TRUE(server_.listen({"127.0.0.1", 0}).ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    asio::post(io_, [this] { server_.close(); });
    io_.stop();
    thread_.join();
    std::filesystem::remove_all(dir_);
  }
  Client client(const std::string& ca) {
    ClientOptions o;
    o.url = "https://127.0.0.1:" + std::to_string(server_.port());
    o.token = "vsk_tls";
    o.ca_file = ca;
    o.timeout = std::chrono::seconds(30);
    return Client(o);
  }

  std::string dir_;
  http::testing::TestPki a_, b_;
  asio::io_context io_;
  http::HttpServer server_{io_};
  http::TlsThreads threads_{1};
  std::unique_ptr<http::TlsTerminator> tls_;
  std::thread thread_;
};

TEST_F(ClientTlsTest, VerifiesTheServerWithTheCaFile) {
  auto r = client(a_.ca).get("/v1/echo");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(str(*r, "auth"), "Bearer vsk_tls");
  auto events = client(a_.ca).stream("GET", "/v1/sse");
  ASSERT_TRUE(events.ok()) << events.error().message();
  auto e = events->next();
  ASSERT_TRUE(e.ok() && e->has_value()) << (e.ok() ? "ended" : e.error().message());
  EXPECT_EQ((*e)->type, "one");
}

TEST_F(ClientTlsTest, RefusesAServerAnotherCaSigned) {
  auto wrong = client(b_.ca).get("/v1/echo");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code(), Code::kUnauthenticated);
  EXPECT_THAT(wrong.error().message(), HasSubstr("is not trusted"));
  EXPECT_THAT(wrong.error().message(), HasSubstr(b_.ca + ", which is not the CA that signed it"));
  // Without a CA file, the system's store, which has never heard of it.
  auto system = client("").get("/v1/echo");
  ASSERT_FALSE(system.ok());
  EXPECT_THAT(system.error().message(), HasSubstr("--ca-file or VESSEL_CA_FILE"));
  auto missing = client(dir_ + "/nope.pem").get("/v1/echo");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().message(), HasSubstr("nope.pem"));
}

}  // namespace
}  // namespace vessel::client
