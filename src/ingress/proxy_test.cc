// The sandbox-port ingress end to end on the host: a real HttpServer with
// the Proxy (and TlsFront) installed, the real agent run on the host (so a
// "sandbox port" is a port of this host's loopback), a small HTTP server
// as the sandbox's, and Beast clients.
#include "ingress/proxy.h"

#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <filesystem>

#include "agentclient/testing/agent_harness.h"
#include "ingress/tls.h"

namespace vessel::ingress {
namespace {

namespace beast = boost::beast;
namespace json = boost::json;
using agentclient::testing::runFor;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
constexpr auto kTok = asio::as_tuple(asio::use_awaitable);

// The sandbox's server: answers every request with what it saw.
asio::awaitable<void> upstreamConn(tcp::socket sock, std::string name) {
  beast::tcp_stream s(std::move(sock));
  beast::flat_buffer buf;
  for (;;) {
    http::request<http::string_body> req;
    auto [ec, n] = co_await http::async_read(s, buf, req, kTok);
    if (ec) break;
    http::response<http::string_body> res{http::status::ok, req.version()};
    auto tok = req.find("e2b-traffic-access-token");
    res.body() = name + " host=" + std::string(req[http::field::host]) + " body=" + req.body() +
                 " token=" + (tok == req.end() ? "none" : "leaked");
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    auto [wec, wn] = co_await http::async_write(s, res, kTok);
    if (wec || !req.keep_alive()) break;
  }
  boost::system::error_code ec;
  s.socket().shutdown(tcp::socket::shutdown_send, ec);
}

asio::awaitable<void> upstream(tcp::acceptor& a, std::string name) {
  for (;;) {
    auto [ec, sock] = co_await a.async_accept(kTok);
    if (ec) co_return;
    asio::co_spawn(a.get_executor(), upstreamConn(std::move(sock), name), asio::detached);
  }
}

// A sandbox server that answers each request head with `answer(head)` as
// raw bytes (whatever framing it likes), then, when `echo`, sends back
// whatever else comes on the connection.
using Canned = std::function<std::string(const http::request<http::empty_body>&)>;
asio::awaitable<void> rawConn(tcp::socket sock, Canned answer, bool echo) {
  beast::tcp_stream s(std::move(sock));
  beast::flat_buffer buf;
  for (;;) {
    http::request_parser<http::empty_body> p;
    auto [ec, n] = co_await http::async_read_header(s, buf, p, kTok);
    if (ec) break;
    std::string out = answer(p.get());
    auto [wec, wn] = co_await asio::async_write(s, asio::buffer(out), kTok);
    if (wec) break;
    if (echo) {
      if (buf.size()) {
        std::string pending(static_cast<const char*>(buf.data().data()), buf.size());
        buf.consume(buf.size());
        co_await asio::async_write(s, asio::buffer(pending), kTok);
      }
      char chunk[4096];
      for (;;) {
        auto [rec, rn] = co_await s.socket().async_read_some(asio::buffer(chunk), kTok);
        if (rec) break;
        auto [eec, en] = co_await asio::async_write(s, asio::buffer(chunk, rn), kTok);
        if (eec) break;
      }
      break;
    }
  }
  boost::system::error_code ec;
  s.socket().shutdown(tcp::socket::shutdown_send, ec);
}

asio::awaitable<void> rawUpstream(tcp::acceptor& a, Canned answer, bool echo) {
  for (;;) {
    auto [ec, sock] = co_await a.async_accept(kTok);
    if (ec) co_return;
    asio::co_spawn(a.get_executor(), rawConn(std::move(sock), answer, echo), asio::detached);
  }
}

struct Reply {
  unsigned status = 0;
  std::string body;
};

// Requests on one client connection, in order.
template <typename Stream>
asio::awaitable<Result<std::vector<Reply>>> exchange(
    Stream& s, std::vector<http::request<http::string_body>> reqs) {
  std::vector<Reply> out;
  beast::flat_buffer buf;
  for (auto& req : reqs) {
    req.prepare_payload();
    auto [wec, wn] = co_await http::async_write(s, req, kTok);
    if (wec) co_return Error(Code::kUnavailable, "write: " + wec.message());
    http::response<http::string_body> res;
    auto [rec, rn] = co_await http::async_read(s, buf, res, kTok);
    if (rec) co_return Error(Code::kUnavailable, "read: " + rec.message());
    out.push_back({res.result_int(), res.body()});
  }
  co_return out;
}

http::request<http::string_body> get(std::string host, std::string body = "",
                                     std::string token = "") {
  http::request<http::string_body> r{body.empty() ? http::verb::get : http::verb::post, "/x", 11};
  r.set(http::field::host, host);
  if (!token.empty()) r.set("e2b-traffic-access-token", token);
  r.body() = std::move(body);
  return r;
}

class ProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto h = agentclient::testing::HostAgent::start(io_, VESSEL_AGENT_BINARY);
    ASSERT_TRUE(h.ok()) << h.error().message();
    agent_ = std::move(*h);
    Sandboxes sb;
    sb.route = [this](const std::string& id) -> Result<Route> {
      if (id == "sb-paused") return Route{nullptr, "", "", true};
      if (id == "sb-sleeping" && !awake_) return Route{nullptr, "secret-token", "", true};
      if (id != "sb-1" && id != "sb-tok" && id != "sb-mask" && id != "sb-sleeping")
        return Error(Code::kNotFound, "no such sandbox");
      Route r{agent_->client(), "", ""};
      if (id == "sb-tok" || id == "sb-sleeping") r.traffic_token = "secret-token";
      if (id == "sb-mask") r.mask_host = "inside.example:${PORT}";
      return r;
    };
    // Only sb-sleeping can be woken (the lifecycle refuses the others).
    sb.wake = [this](const std::string& id) -> asio::awaitable<Status> {
      wakes_.push_back(id);
      if (id != "sb-sleeping") co_return Error(Code::kFailedPrecondition, "no auto-resume");
      awake_ = true;
      co_return okStatus();
    };
    proxy_ = std::make_unique<Proxy>("vessel.test:1", std::move(sb), 49983);
    server_ = std::make_unique<http::HttpServer>(io_);
    server_->route(http::verb::get, "/health", [](const http::Request& req) {
      return [](const http::Request& req) -> asio::awaitable<http::Response> {
        co_return http::jsonResponse(req, http::status::ok, "{\"own\":true}");
      }(req);
    });
    proxy_->install(*server_);
    ASSERT_TRUE(server_->listen({"127.0.0.1", 0}).ok());
    up1_.emplace(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    up2_.emplace(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    asio::co_spawn(io_, upstream(*up1_, "one"), asio::detached);
    asio::co_spawn(io_, upstream(*up2_, "two"), asio::detached);
  }
  void TearDown() override {
    server_->close();
    up1_->close();
    up2_->close();
  }
  std::string host(const tcp::acceptor& a, const std::string& id = "sb-1") {
    return std::to_string(a.local_endpoint().port()) + "-" + id +
           ".vessel.test:" + std::to_string(server_->port());
  }
  Result<std::vector<Reply>> plain(std::vector<http::request<http::string_body>> reqs) {
    return runFor(
        io_,
        [](asio::io_context& io, uint16_t port, std::vector<http::request<http::string_body>> reqs)
            -> asio::awaitable<Result<std::vector<Reply>>> {
          beast::tcp_stream s(io);
          auto [ec] = co_await s.async_connect(
              tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), kTok);
          if (ec) co_return Error(Code::kUnavailable, ec.message());
          co_return co_await exchange(s, std::move(reqs));
        }(io_, server_->port(), std::move(reqs)),
        30s);
  }

  asio::io_context io_;
  std::unique_ptr<agentclient::testing::HostAgent> agent_;
  std::unique_ptr<Proxy> proxy_;
  std::unique_ptr<http::HttpServer> server_;
  bool awake_ = false;              // sb-sleeping was woken
  std::vector<std::string> wakes_;  // ids wake was asked for
  std::optional<tcp::acceptor> up1_, up2_;
};

TEST_F(ProxyTest, RoutesByHostKeepsAliveAndSwitchesTargets) {
  auto r =
      plain({get(host(*up1_)), get(host(*up1_), "posted"), get(host(*up2_)), get(host(*up1_))});
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].status, 200u);
  EXPECT_EQ((*r)[0].body, "one host=" + host(*up1_) + " body= token=none");
  EXPECT_EQ((*r)[1].body, "one host=" + host(*up1_) + " body=posted token=none");
  // Another port on the same connection: a new guest connection.
  EXPECT_EQ((*r)[2].body, "two host=" + host(*up2_) + " body= token=none");
  EXPECT_EQ((*r)[3].body, "one host=" + host(*up1_) + " body= token=none");
}

TEST_F(ProxyTest, ListenerRoutesStayItsOwn) {
  auto own = get("127.0.0.1");
  own.target("/health");
  auto envd = get("49983-sb-1.vessel.test");
  envd.target("/health");
  auto r = plain({own, envd});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ((*r)[0].body, "{\"own\":true}");
  EXPECT_EQ((*r)[1].body, "{\"own\":true}");
}

TEST_F(ProxyTest, UnknownSandboxAndClosedPortAre502) {
  uint16_t closed;
  {
    tcp::acceptor a(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    closed = a.local_endpoint().port();
  }
  auto r = plain({get(host(*up1_, "sb-gone")), get(host(*up1_, "sb-paused")),
                  get(std::to_string(closed) + "-sb-1.vessel.test")});
  ASSERT_TRUE(r.ok()) << r.error().message();
  for (int i : {0, 1}) {
    EXPECT_EQ((*r)[i].status, 502u);
    auto v = json::parse((*r)[i].body).as_object();
    EXPECT_EQ(v["message"], "The sandbox was not found");
    EXPECT_EQ(v["code"], 502);
  }
  EXPECT_EQ(json::parse((*r)[0].body).as_object()["sandboxId"], "sb-gone");
  EXPECT_EQ((*r)[2].status, 502u);
  EXPECT_NE((*r)[2].body.find("port " + std::to_string(closed) + " is not open"), std::string::npos)
      << (*r)[2].body;
}

TEST_F(ProxyTest, WaitsForAServerThatIsStillStarting) {
  // Bound, not yet listening: refused until the "server" comes up.
  tcp::acceptor late(io_);
  late.open(tcp::v4());
  late.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  asio::steady_timer starts(io_, 300ms);
  starts.async_wait([&](boost::system::error_code) {
    late.listen();
    asio::co_spawn(io_, upstream(late, "late"), asio::detached);
  });
  auto r = plain({get(host(late))});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ((*r)[0].status, 200u);
  EXPECT_EQ((*r)[0].body.substr(0, 5), "late ");
  late.close();
}

TEST_F(ProxyTest, TrafficTokenAndMaskedHost) {
  auto r = plain({get(host(*up1_, "sb-tok")), get(host(*up1_, "sb-tok"), "", "secret-token"),
                  get(host(*up1_, "sb-tok"), "", "wrong"),
                  get(host(*up1_, "sb-tok"), "", "secret-token")});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ((*r)[0].status, 403u);
  EXPECT_EQ((*r)[1].status, 200u);
  // The token is the proxy's business: the sandbox never sees it.
  EXPECT_NE((*r)[1].body.find("token=none"), std::string::npos);
  // A later request without the right token on the same connection is refused too.
  EXPECT_EQ((*r)[2].status, 403u);
  EXPECT_EQ((*r)[3].status, 200u);
  auto m = plain({get(host(*up1_, "sb-mask"))});
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ((*m)[0].body, "one host=inside.example:" +
                              std::to_string(up1_->local_endpoint().port()) + " body= token=none");
}

// A paused sandbox is woken by traffic only when the request may reach it:
// without its traffic token nothing is resumed. One the lifecycle will not
// wake (no auto-resume) stays a 502.
TEST_F(ProxyTest, TrafficWakesAPausedSandboxOnlyWithItsToken) {
  auto denied = plain({get(host(*up1_, "sb-sleeping"))});
  ASSERT_TRUE(denied.ok()) << denied.error().message();
  EXPECT_EQ((*denied)[0].status, 502u);
  EXPECT_TRUE(wakes_.empty());
  EXPECT_FALSE(awake_);
  auto asleep = plain({get(host(*up1_, "sb-paused"))});
  ASSERT_TRUE(asleep.ok()) << asleep.error().message();
  EXPECT_EQ((*asleep)[0].status, 502u);
  EXPECT_EQ(wakes_, std::vector<std::string>{"sb-paused"});
  auto woke = plain({get(host(*up1_, "sb-sleeping"), "", "secret-token")});
  ASSERT_TRUE(woke.ok()) << woke.error().message();
  EXPECT_EQ((*woke)[0].status, 200u);
  EXPECT_TRUE(awake_);
  EXPECT_EQ(wakes_, (std::vector<std::string>{"sb-paused", "sb-sleeping"}));
}

TEST_F(ProxyTest, HttpsWithTheIngressCa) {
  auto dir =
      std::filesystem::temp_directory_path() / ("vessel-ingress-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto tls = TlsFront::create(io_, dir.string(), "vessel.test:1");
  ASSERT_TRUE(tls.ok()) << tls.error().message();
  (*tls)->install(*server_);
  EXPECT_EQ((*tls)->caPath(), (dir / "ingress-ca.pem").string());
  EXPECT_EQ((*tls)->certificateName("8000-SB-1.vessel.test"), "8000-sb-1.vessel.test");
  EXPECT_EQ((*tls)->certificateName("elsewhere.test"), "vessel.test");
  std::string name = std::to_string(up1_->local_endpoint().port()) + "-sb-1.vessel.test";
  // Named: g++ 12 destroys a prvalue argument of a coroutine twice.
  std::string via = host(*up1_);
  auto r = runFor(
      io_,
      [](asio::io_context& io, uint16_t port, std::string ca, std::string name,
         std::string host) -> asio::awaitable<Result<std::vector<Reply>>> {
        asio::ssl::context ctx(asio::ssl::context::tls_client);
        ctx.load_verify_file(ca);
        ctx.set_verify_mode(asio::ssl::verify_peer);
        asio::ssl::stream<beast::tcp_stream> s(io, ctx);
        SSL_set_tlsext_host_name(s.native_handle(), name.c_str());
        SSL_set1_host(s.native_handle(), name.c_str());
        auto [ec] = co_await beast::get_lowest_layer(s).async_connect(
            tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), kTok);
        if (ec) co_return Error(Code::kUnavailable, ec.message());
        auto [hec] = co_await s.async_handshake(asio::ssl::stream_base::client, kTok);
        if (hec) co_return Error(Code::kUnavailable, "handshake: " + hec.message());
        std::vector<http::request<http::string_body>> reqs{get(host), get(host, "again")};
        co_return co_await exchange(s, std::move(reqs));
      }(io_, server_->port(), (*tls)->caPath(), name, via),
      30s);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ((*r)[0].status, 200u);
  EXPECT_EQ((*r)[1].body, "one host=" + host(*up1_) + " body=again token=none");
}

// Responses are framed, not relayed as bytes (http/relay.h): an interim
// 100 before the answer reaches the client as what it is, and an `Upgrade`
// header on a 200 leaves the connection HTTP, its next request answered.
TEST_F(ProxyTest, InterimAndUpgradeHeaderOn200StayFramed) {
  tcp::acceptor raw(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  Canned answer = [](const http::request<http::empty_body>& h) -> std::string {
    if (h.target() == "/continue")
      return "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nmade";
    if (h.target() == "/upgrade")
      return "HTTP/1.1 200 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Content-Length: 5\r\n\r\nno ws";
    return "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain";
  };
  asio::co_spawn(io_, rawUpstream(raw, answer, false), asio::detached);
  auto cont = get(host(raw));
  cont.target("/continue");
  auto up = get(host(raw));
  up.target("/upgrade");
  up.set(http::field::upgrade, "websocket");
  up.set(http::field::connection, "Upgrade");
  auto after = get(host(raw));
  auto r = plain({cont, up, after});
  raw.close();
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->size(), 3u);
  // Beast's client reads the 100 as a response of its own: then the 200.
  EXPECT_EQ((*r)[0].status, 100u);
  EXPECT_EQ((*r)[1].status, 200u);
  EXPECT_EQ((*r)[1].body, "made");
  // The 200 to the upgrade request, then `after` answered on the same
  // connection: it stayed HTTP.
  EXPECT_EQ((*r)[2].status, 200u);
  EXPECT_EQ((*r)[2].body, "no ws");
}

// A 101 to a request that asked for no upgrade is the server's error: the
// client never sees it, nor the bytes after it.
TEST_F(ProxyTest, A101NobodyAskedForIsCut) {
  tcp::acceptor raw(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  Canned answer = [](const http::request<http::empty_body>&) -> std::string {
    return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "\r\nHTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsmuggle";
  };
  asio::co_spawn(io_, rawUpstream(raw, answer, false), asio::detached);
  auto r = plain({get(host(raw))});
  raw.close();
  ASSERT_FALSE(r.ok()) << "the client got " << (*r)[0].status << " " << (*r)[0].body;
}

// A 101 to a well-formed upgrade request switches: bytes both ways.
TEST_F(ProxyTest, A101ToAnUpgradeRequestSwitches) {
  tcp::acceptor raw(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  Canned answer = [](const http::request<http::empty_body>&) -> std::string {
    return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "\r\n";
  };
  asio::co_spawn(io_, rawUpstream(raw, answer, true), asio::detached);
  std::string via = host(raw);
  auto r = runFor(
      io_,
      [](asio::io_context& io, uint16_t port,
         std::string via) -> asio::awaitable<Result<std::pair<unsigned, std::string>>> {
        beast::tcp_stream s(io);
        auto [ec] = co_await s.async_connect(
            tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), kTok);
        if (ec) co_return Error(Code::kUnavailable, ec.message());
        http::request<http::empty_body> req{http::verb::get, "/ws", 11};
        req.set(http::field::host, via);
        req.set(http::field::upgrade, "websocket");
        req.set(http::field::connection, "Upgrade");
        auto [wec, wn] = co_await http::async_write(s, req, kTok);
        if (wec) co_return Error(Code::kUnavailable, "write: " + wec.message());
        beast::flat_buffer buf;
        http::response_parser<http::empty_body> res;
        auto [rec, rn] = co_await http::async_read_header(s, buf, res, kTok);
        if (rec) co_return Error(Code::kUnavailable, "read: " + rec.message());
        std::string frame = "\x81\x04ping not http";
        auto [fec, fn] = co_await asio::async_write(s, asio::buffer(frame), kTok);
        if (fec) co_return Error(Code::kUnavailable, "frame: " + fec.message());
        std::string echoed(static_cast<const char*>(buf.data().data()), buf.size());
        char chunk[256];
        while (echoed.size() < frame.size()) {
          auto [eec, en] = co_await s.socket().async_read_some(asio::buffer(chunk), kTok);
          if (eec) co_return Error(Code::kUnavailable, "echo: " + eec.message());
          echoed.append(chunk, en);
        }
        co_return std::make_pair(res.get().result_int(), echoed);
      }(io_, server_->port(), via),
      30s);
  raw.close();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->first, 101u);
  EXPECT_EQ(r->second, "\x81\x04ping not http");
}

TEST(SerializeHeadTest, MasksHostAndDropsTheToken) {
  http::request<http::empty_body> h{http::verb::get, "/a?b", 11};
  h.set(http::field::host, "8000-sb-1.vessel.test");
  h.set("E2B-Traffic-Access-Token", "t");
  h.set("X-Other", "y");
  EXPECT_EQ(serializeHead(h, "", 8000),
            "GET /a?b HTTP/1.1\r\nHost: 8000-sb-1.vessel.test\r\nX-Other: y\r\n\r\n");
  EXPECT_EQ(serializeHead(h, "h.example:${PORT}", 8000),
            "GET /a?b HTTP/1.1\r\nHost: h.example:8000\r\nX-Other: y\r\n\r\n");
  http::request<http::empty_body> lower{http::verb::get, "/", 11};
  lower.set("host", "x");
  lower.set("x-mine", "y");
  EXPECT_EQ(serializeHead(lower, "", 1), "GET / HTTP/1.1\r\nHost: x\r\nx-mine: y\r\n\r\n");
}

}  // namespace
}  // namespace vessel::ingress
