// Sandbox ports as a boundary (issue 25), on proxy_test.h's fixture: one
// target per connection, one Host, absolute-form targets, private routes,
// the caps and the idle limits.
#include <gtest/gtest.h>

#include <algorithm>

#include "ingress/proxy_test.h"

namespace vessel::ingress {
namespace {

using agentclient::testing::runFor;
using namespace std::chrono_literals;

TEST_F(ProxyTest, RoutesByHostAndKeepsAlive) {
  auto r = plain({get(host(*up1_)), get(host(*up1_), "posted"), get(host(*up1_))});
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].status, 200u);
  EXPECT_EQ((*r)[0].body, "one host=" + host(*up1_) + " body= token=none");
  EXPECT_EQ((*r)[1].body, "one host=" + host(*up1_) + " body=posted token=none");
  EXPECT_EQ((*r)[2].body, "one host=" + host(*up1_) + " body= token=none");
}

// A later request on the connection for another target is never switched
// to: another port is refused (421) after the earlier answers and the
// connection ends, the other server never reached.
TEST_F(ProxyTest, AnotherTargetOnAConnectionIsRefusedNotSwitched) {
  auto r = plain({get(host(*up1_)), get(host(*up2_)), get(host(*up1_))});
  ASSERT_FALSE(r.ok()) << "the third request was answered";
  EXPECT_EQ(served()["two"], 0);
  auto seen = raw("GET /x HTTP/1.1\r\nHost: " + host(*up1_) + "\r\n\r\n" +
                  "GET /x HTTP/1.1\r\nHost: " + host(*up2_) + "\r\n\r\n");
  ASSERT_TRUE(seen.ok()) << seen.error().message();
  EXPECT_NE(seen->find("one host="), std::string::npos) << *seen;
  EXPECT_NE(seen->find("HTTP/1.1 421 "), std::string::npos) << *seen;
  EXPECT_EQ(seen->find("two host="), std::string::npos) << *seen;
  EXPECT_EQ(served()["two"], 0);
}

// Pipelined: the request for another sandbox arrives with the first one,
// before its answer. It reaches neither sandbox; the connection closes.
TEST_F(ProxyTest, APipelinedRequestForAnotherSandboxIsNotRelayed) {
  std::string other = host(*up2_, "sb-2");
  auto seen = raw("GET /x HTTP/1.1\r\nHost: " + host(*up1_) + "\r\n\r\n" +
                  "POST /x HTTP/1.1\r\nHost: " + other + "\r\nContent-Length: 5\r\n\r\nsmugl" +
                  "GET /x HTTP/1.1\r\nHost: " + host(*up1_) + "\r\n\r\n");
  ASSERT_TRUE(seen.ok()) << seen.error().message();
  EXPECT_EQ(seen->find("one host="), seen->rfind("one host=")) << "answered twice: " << *seen;
  EXPECT_NE(seen->find("HTTP/1.1 421 "), std::string::npos) << *seen;
  EXPECT_EQ(seen->find("smugl"), std::string::npos) << *seen;
  EXPECT_EQ(served()["one"], 1);
  EXPECT_EQ(served()["two"], 0);
}

// Two Host fields are refused before anything is relayed: a proxy and a
// server could each read another one.
TEST_F(ProxyTest, TwoHostHeadersAreRefused) {
  for (std::string second : {host(*up2_, "sb-2"), host(*up1_)}) {
    auto seen = raw("GET /x HTTP/1.1\r\nHost: " + host(*up1_) + "\r\nHost: " + second + "\r\n\r\n");
    ASSERT_TRUE(seen.ok()) << seen.error().message();
    EXPECT_EQ(seen->substr(0, 12), "HTTP/1.1 400") << *seen;
  }
  EXPECT_EQ(served()["one"], 0);
  EXPECT_EQ(served()["two"], 0);
}

// An absolute-form target is routed by its authority, whatever the Host
// says, and the guest gets the path and that authority as its Host.
TEST_F(ProxyTest, AnAbsoluteTargetIsRoutedByItsAuthority) {
  auto r = get(host(*up1_));
  r.target("http://" + host(*up2_) + "/x");
  auto got = plain({r});
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ((*got)[0].body, "two host=" + host(*up2_) + " body= token=none");
  EXPECT_EQ(served()["one"], 0);
}

// A private sandbox (a native one's default) is reached with its traffic
// token or a data-plane session of it; neither reaches the guest.
TEST_F(ProxyTest, APrivateSandboxTakesItsTokenOrASession) {
  std::string h = host(*up1_, "sb-private");
  auto none = plain({get(h)});
  ASSERT_TRUE(none.ok()) << none.error().message();
  EXPECT_EQ((*none)[0].status, 403u);
  auto wrong = plain({get(h, "", "vst_other")});
  ASSERT_TRUE(wrong.ok()) << wrong.error().message();
  EXPECT_EQ((*wrong)[0].status, 403u);
  EXPECT_EQ(served()["one"], 0);
  for (std::string token : {"traffic-private", "vst_session"}) {
    auto ok = plain({get(h, "", token)});
    ASSERT_TRUE(ok.ok()) << ok.error().message();
    EXPECT_EQ((*ok)[0].status, 200u);
    EXPECT_EQ((*ok)[0].body, "one host=" + h + " body= token=none");
  }
  // Two token headers are no token.
  auto two = get(h, "", "traffic-private");
  two.insert("e2b-traffic-access-token", "traffic-private");
  auto dup = plain({two});
  ASSERT_TRUE(dup.ok()) << dup.error().message();
  EXPECT_EQ((*dup)[0].status, 403u);
}

// 300 idle keep-alive connections from one peer to one sandbox's port:
// past the per-peer cap they are refused (503), and a client from another
// address still gets through (the agent takes 256 port streams in all).
TEST_F(ProxyTest, IdleConnectionsFromOnePeerLeaveRoomForOthers) {
  std::string h = host(*up1_);
  auto r = runFor(
      io_,
      [](asio::io_context& io, uint16_t port,
         std::string h) -> asio::awaitable<Result<std::pair<std::vector<unsigned>, unsigned>>> {
        std::vector<std::unique_ptr<beast::tcp_stream>> held;
        std::vector<unsigned> statuses;
        auto one = [&io, port, h](std::string from,
                                  beast::tcp_stream& s) -> asio::awaitable<Result<unsigned>> {
          s.socket().open(tcp::v4());
          s.socket().bind(tcp::endpoint(asio::ip::make_address(from), 0));
          auto [ec] = co_await s.async_connect(
              tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), kTok);
          if (ec) co_return Error(Code::kUnavailable, ec.message());
          http::request<http::string_body> req{http::verb::get, "/x", 11};
          req.set(http::field::host, h);
          auto [wec, wn] = co_await http::async_write(s, req, kTok);
          if (wec) co_return Error(Code::kUnavailable, "write: " + wec.message());
          beast::flat_buffer buf;
          http::response<http::string_body> res;
          auto [rec, rn] = co_await http::async_read(s, buf, res, kTok);
          if (rec) co_return 0u;  // refused at accept, closed
          co_return res.result_int();
        };
        for (int i = 0; i < 300; ++i) {
          held.push_back(std::make_unique<beast::tcp_stream>(io));
          std::string attacker = "127.0.0.2";
          auto st = co_await one(attacker, *held.back());
          if (!st.ok()) co_return st.error();
          statuses.push_back(*st);
        }
        beast::tcp_stream other(io);
        std::string neighbour = "127.0.0.3";
        auto st = co_await one(neighbour, other);
        if (!st.ok()) co_return st.error();
        co_return std::make_pair(statuses, *st);
      }(io_, server_->port(), h),
      120s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  size_t ok = std::count(r->first.begin(), r->first.end(), 200u);
  EXPECT_EQ(ok, limits_.per_peer);
  EXPECT_EQ(r->second, 200u) << "another client was shut out";
}

class ProxyIdleTest : public ProxyTest {
 protected:
  void SetUp() override {
    limits_.idle = 1s;
    limits_.body_idle = 1s;
    ProxyTest::SetUp();
  }
};

// A connection that owes nothing and carries nothing is closed after the
// idle limit; so is one whose request body stops coming.
TEST_F(ProxyIdleTest, IdleAndStalledConnectionsAreClosed) {
  auto idle = raw("GET /x HTTP/1.1\r\nHost: " + host(*up1_) + "\r\n\r\n");
  ASSERT_TRUE(idle.ok()) << idle.error().message();
  EXPECT_NE(idle->find("one host="), std::string::npos) << *idle;
  auto stalled =
      raw("POST /x HTTP/1.1\r\nHost: " + host(*up1_) + "\r\nContent-Length: 10\r\n\r\nabc");
  ASSERT_TRUE(stalled.ok()) << stalled.error().message();
  EXPECT_EQ(stalled->find("one host="), std::string::npos) << *stalled;
}
}  // namespace
}  // namespace vessel::ingress
