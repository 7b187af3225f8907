// The forwarder (http/forward.h) between a real client socket and two
// real upstream HttpServers: a streamed response arrives piece by piece, a
// response cut by its upstream is cut for the client too, uploads far over
// the front server's body limit pass through whole, and one keep-alive
// client connection carries requests for different upstreams in turn.
#include "http/forward.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <future>
#include <thread>

#include "http/server.h"

namespace vessel::http {
namespace {

namespace beast = boost::beast;
using tcp = asio::ip::tcp;

// An upstream named `name`: GET /who answers its name and the port the
// request came from; POST /upload counts what it was sent; POST /stream
// sends "one", waits for the test's go, then "two"; POST /cut sends "one"
// and drops the connection.
class TestUpstream {
 public:
  TestUpstream(asio::io_context& io, std::string name)
      : name_(std::move(name)), server_(io), gate_(io) {
    gate_.expires_at(asio::steady_timer::time_point::max());
    server_.router().addStream(
        http::verb::get, "/who",
        [this](const Request& req, const Params&,
               beast::tcp_stream& s) -> asio::awaitable<std::optional<Response>> {
          Response res{http::status::ok, req.version()};
          res.keep_alive(req.keep_alive());
          res.body() = name_ + " " + std::to_string(s.socket().remote_endpoint().port()) + " " +
                       std::string(req[http::field::host]);
          res.prepare_payload();
          co_return res;
        });
    server_.router().addUpload(
        http::verb::post, "/upload", 64u << 20,
        [](const Request& req, const Params&, BodyReader& body) -> asio::awaitable<Response> {
          uint64_t n = 0, sum = 0;
          for (;;) {
            auto c = co_await body.next();
            if (!c.ok() || !*c) break;
            n += (*c)->size();
            for (unsigned char ch : **c) sum += ch;
          }
          Response res{http::status::ok, req.version()};
          res.keep_alive(req.keep_alive());
          res.body() = std::to_string(n) + " " + std::to_string(sum);
          res.prepare_payload();
          co_return res;
        });
    auto chunked = [this](bool cut) {
      return [this, cut](const Request& req, const Params&,
                         beast::tcp_stream& s) -> asio::awaitable<std::optional<Response>> {
        http::response<http::empty_body> head{http::status::ok, req.version()};
        head.chunked(true);
        head.keep_alive(true);
        http::response_serializer<http::empty_body> sr(head);
        co_await http::async_write_header(s, sr, asio::as_tuple(asio::use_awaitable));
        co_await asio::async_write(s, http::make_chunk(asio::buffer(std::string_view("one"))),
                                   asio::as_tuple(asio::use_awaitable));
        if (cut) {
          boost::system::error_code ec;
          s.socket().close(ec);
          co_return std::nullopt;
        }
        co_await gate_.async_wait(asio::as_tuple(asio::use_awaitable));
        co_await asio::async_write(s, http::make_chunk(asio::buffer(std::string_view("two"))),
                                   asio::as_tuple(asio::use_awaitable));
        co_await asio::async_write(s, http::make_chunk_last(), asio::as_tuple(asio::use_awaitable));
        co_return writtenKeepAlive();
      };
    };
    // GET /early: a 103 Early Hints before the final answer.
    server_.router().addStream(
        http::verb::get, "/early",
        [](const Request&, const Params&,
           beast::tcp_stream& s) -> asio::awaitable<std::optional<Response>> {
          std::string raw =
              "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
              "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal";
          co_await asio::async_write(s, asio::buffer(raw), asio::as_tuple(asio::use_awaitable));
          co_return writtenKeepAlive();
        });
    server_.router().addStream(http::verb::post, "/stream", chunked(false));
    server_.router().addStream(http::verb::post, "/cut", chunked(true));
  }
  Status listen() { return server_.listen({"127.0.0.1", 0}); }
  Upstream at() const { return Upstream{"127.0.0.1", server_.port()}; }
  void open() { gate_.cancel(); }
  void close() { server_.close(); }

 private:
  std::string name_;
  HttpServer server_;
  asio::steady_timer gate_;
};

class HttpForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(a_.listen().ok());
    ASSERT_TRUE(b_.listen().ok());
    // The front's own body limit is tiny: forwarded bodies never meet it.
    front_.forwardWhen([this](const http::request_header<>& h) -> std::optional<Upstream> {
      auto which = h["X-Upstream"];
      if (which == "a") return a_.at();
      if (which == "b") return b_.at();
      if (which == "dead") return Upstream{"127.0.0.1", 1};
      return std::nullopt;
    });
    front_.route(http::verb::get, "/who", [](const Request& r) -> asio::awaitable<Response> {
      co_return jsonResponse(r, http::status::ok, "local");
    });
    ASSERT_TRUE(front_.listen({"127.0.0.1", 0}).ok());
    thread_ = std::thread([this] { io_.run(); });
    sock_.connect({asio::ip::make_address("127.0.0.1"), front_.port()});
  }
  void TearDown() override {
    asio::post(io_, [this] {
      front_.close();
      a_.close();
      b_.close();
    });
    io_.stop();
    thread_.join();
  }
  http::response<http::string_body> roundTrip(const std::string& raw) {
    asio::write(sock_, asio::buffer(raw));
    http::response<http::string_body> res;
    http::read(sock_, buf_, res);
    return res;
  }
  static std::string get(const std::string& path, const std::string& to) {
    return "GET " + path + " HTTP/1.1\r\nHost: sb.example\r\n" +
           (to.empty() ? "" : "X-Upstream: " + to + "\r\n") + "\r\n";
  }

  asio::io_context io_;
  TestUpstream a_{io_, "a"}, b_{io_, "b"};
  HttpServer front_{io_, ServerLimits{4096, 1024, std::chrono::seconds(30)}};
  std::thread thread_;
  asio::io_context cio_;
  tcp::socket sock_{cio_};
  beast::flat_buffer buf_;
};

TEST_F(HttpForwardTest, OneKeepAliveConnectionReachesEachRequestsUpstream) {
  auto a1 = roundTrip(get("/who", "a"));
  ASSERT_EQ(a1.result(), http::status::ok);
  EXPECT_EQ(a1.body().substr(0, 2), "a ");
  EXPECT_NE(a1.body().find(" sb.example"), std::string::npos) << "the Host goes along";
  auto a2 = roundTrip(get("/who", "a"));
  EXPECT_EQ(a2.body(), a1.body()) << "the upstream connection is kept for the same upstream";
  EXPECT_EQ(roundTrip(get("/who", "b")).body().substr(0, 2), "b ");
  EXPECT_EQ(roundTrip(get("/who", "")).body(), "local");
  EXPECT_EQ(roundTrip(get("/who", "a")).body().substr(0, 2), "a ");
  auto dead = roundTrip(get("/who", "dead"));
  EXPECT_EQ(dead.result(), http::status::bad_gateway);
  EXPECT_NE(dead.body().find("\"code\":\"unavailable\""), std::string::npos) << dead.body();
}

// Before the relay's rules, the 103 was taken as the answer: the 200 stayed
// in the upstream connection's buffer and answered the next request.
TEST_F(HttpForwardTest, AForwarded1xxIsNotTakenAsFinal) {
  asio::write(sock_, asio::buffer(get("/early", "a")));
  http::response<http::string_body> interim;
  http::read(sock_, buf_, interim);
  EXPECT_EQ(interim.result_int(), 103);
  EXPECT_EQ(interim[http::field::link], "</style.css>; rel=preload");
  // Bounded: the final response must come (it never did before).
  pollfd p{sock_.native_handle(), POLLIN, 0};
  ASSERT_TRUE(buf_.size() > 0 || ::poll(&p, 1, 30'000) == 1) << "no final response";
  http::response<http::string_body> final_res;
  http::read(sock_, buf_, final_res);
  EXPECT_EQ(final_res.result_int(), 200);
  EXPECT_EQ(final_res.body(), "final");
  // The connection goes on, each request with its own answer.
  EXPECT_EQ(roundTrip(get("/who", "a")).body().substr(0, 2), "a ");
  EXPECT_EQ(roundTrip(get("/who", "b")).body().substr(0, 2), "b ");
}

TEST_F(HttpForwardTest, UploadsStreamThroughWhateverTheirSize) {
  std::string body(3 << 20, '\0');
  uint64_t sum = 0;
  for (size_t i = 0; i < body.size(); ++i) {
    body[i] = static_cast<char>(i * 7 + 3);
    sum += static_cast<unsigned char>(body[i]);
  }
  const std::string want = std::to_string(body.size()) + " " + std::to_string(sum);
  auto sized = roundTrip("POST /upload HTTP/1.1\r\nHost: x\r\nX-Upstream: b\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_EQ(sized.result(), http::status::ok) << sized.body();
  EXPECT_EQ(sized.body(), want);
  // Chunked, with Expect: 100-continue answered by the forwarder.
  std::string chunked;
  for (size_t at = 0; at < body.size(); at += 100'000) {
    size_t n = std::min<size_t>(100'000, body.size() - at);
    char len[32];
    std::snprintf(len, sizeof len, "%zx\r\n", n);
    chunked += len + body.substr(at, n) + "\r\n";
  }
  chunked += "0\r\n\r\n";
  asio::write(sock_, asio::buffer(
                         std::string("POST /upload HTTP/1.1\r\nHost: x\r\nX-Upstream: a\r\nExpect: "
                                     "100-continue\r\nTransfer-Encoding: chunked\r\n\r\n")));
  http::response_parser<http::empty_body> cp;
  http::read_header(sock_, buf_, cp);
  EXPECT_EQ(cp.get().result(), http::status::continue_);
  auto res = roundTrip(chunked);
  ASSERT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res.body(), want);
  EXPECT_EQ(roundTrip(get("/who", "")).body(), "local");  // the connection goes on
}

TEST_F(HttpForwardTest, AStreamedResponseArrivesAsItIsWritten) {
  asio::write(sock_,
              asio::buffer(std::string("POST /stream HTTP/1.1\r\nHost: x\r\nX-Upstream: a\r\n"
                                       "Content-Length: 0\r\n\r\n")));
  http::response_parser<http::string_body> p;
  http::read_header(sock_, buf_, p);
  ASSERT_EQ(p.get().result(), http::status::ok);
  EXPECT_TRUE(p.get().chunked());
  // "one" comes through while the upstream still holds "two" back.
  while (p.get().body().find("one") == std::string::npos) http::read_some(sock_, buf_, p);
  EXPECT_EQ(p.get().body(), "one");
  asio::post(io_, [this] { a_.open(); });
  http::read(sock_, buf_, p);
  EXPECT_EQ(p.get().body(), "onetwo");
  EXPECT_EQ(roundTrip(get("/who", "b")).body().substr(0, 2), "b ");
}

TEST_F(HttpForwardTest, AnUpstreamCutMidStreamCutsTheClient) {
  asio::write(sock_, asio::buffer(std::string("POST /cut HTTP/1.1\r\nHost: x\r\nX-Upstream: b\r\n"
                                              "Content-Length: 0\r\n\r\n")));
  http::response_parser<http::string_body> p;
  http::read_header(sock_, buf_, p);
  ASSERT_EQ(p.get().result(), http::status::ok);
  boost::system::error_code ec;
  http::read(sock_, buf_, p, ec);
  EXPECT_TRUE(ec) << "the body ended cleanly although its upstream was cut";
  EXPECT_FALSE(p.is_done());
  EXPECT_EQ(p.get().body(), "one");
}

TEST(UpstreamFromUrlTest, ParsesHttpUrlsOnly) {
  auto u = upstreamFromUrl("http://10.0.0.2:49983");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "10.0.0.2");
  EXPECT_EQ(u->port, 49983);
  EXPECT_EQ(upstreamFromUrl("http://node-a.internal/x")->port, 80);
  EXPECT_EQ(upstreamFromUrl("http://node-a.internal/x")->host, "node-a.internal");
  auto t = upstreamFromUrl("https://node-a.internal/x");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->tls);
  EXPECT_EQ(t->port, 443);
  EXPECT_FALSE(u->tls);
  for (const char* bad :
       {"ftp://a:1", "http://:80", "https://:1", "http://a:0", "http://a:99999", "a:80"})
    EXPECT_FALSE(upstreamFromUrl(bad).ok()) << bad;
}

}  // namespace
}  // namespace vessel::http
