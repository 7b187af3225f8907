// The sandbox-port ingress end to end on the host (fixture: proxy_test.h):
// routing, the token, TLS, and the framing of what the guest answers.
#include "ingress/proxy_test.h"

#include <gtest/gtest.h>

namespace vessel::ingress {
namespace {

using agentclient::testing::runFor;
using namespace std::chrono_literals;

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
                  get(host(*up1_, "sb-tok"), "", "secret-token")});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ((*r)[0].status, 403u);
  EXPECT_EQ((*r)[1].status, 200u);
  // The token is the proxy's business: the sandbox never sees it.
  EXPECT_NE((*r)[1].body.find("token=none"), std::string::npos);
  EXPECT_EQ((*r)[2].status, 200u);
  // A later request without the right token on the same connection is
  // refused and ends it.
  auto later = plain({get(host(*up1_, "sb-tok"), "", "secret-token"),
                      get(host(*up1_, "sb-tok"), "", "wrong"),
                      get(host(*up1_, "sb-tok"), "", "secret-token")});
  ASSERT_FALSE(later.ok());
  auto seen = raw("GET /x HTTP/1.1\r\nHost: " + host(*up1_, "sb-tok") +
                  "\r\ne2b-traffic-access-token: secret-token\r\n\r\n"
                  "GET /x HTTP/1.1\r\nHost: " +
                  host(*up1_, "sb-tok") + "\r\n\r\n");
  ASSERT_TRUE(seen.ok()) << seen.error().message();
  EXPECT_NE(seen->find("HTTP/1.1 403 "), std::string::npos) << *seen;
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
  auto tls = TlsFront::create(dir.string(), "vessel.test:1");
  ASSERT_TRUE(tls.ok()) << tls.error().message();
  http::TlsThreads threads(1);
  ASSERT_TRUE((*tls)->install(*server_, threads).ok());
  EXPECT_EQ((*tls)->caPath(), (dir / "ingress-ca.pem").string());
  EXPECT_EQ((*tls)->certificateName("8000-SB-1.vessel.test"), "8000-sb-1.vessel.test");
  EXPECT_EQ((*tls)->certificateName("elsewhere.test"), "vessel.test");
  std::string name = std::to_string(up1_->local_endpoint().port()) + "-sb-1.vessel.test";
  // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
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
