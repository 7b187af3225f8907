// The sandbox-port ingress tests' fixture (proxy_test.cc, proxy_boundary_test.cc),
// end to end on the host: a real HttpServer with
// the Proxy (and TlsFront) installed, the real agent run on the host (so a
// "sandbox port" is a port of this host's loopback), a small HTTP server
// as the sandbox's, and Beast clients.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
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
#include <map>

#include "agentclient/testing/agent_harness.h"
#include "ingress/proxy.h"
#include "ingress/tls.h"

namespace vessel::ingress {

namespace beast = boost::beast;
namespace json = boost::json;
using agentclient::testing::runFor;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
inline constexpr auto kTok = asio::as_tuple(asio::use_awaitable);

// Requests each named sandbox server was sent.
inline std::map<std::string, int>& served() {
  static std::map<std::string, int> m;
  return m;
}

// The sandbox's server: answers every request with what it saw.
inline asio::awaitable<void> upstreamConn(tcp::socket sock, std::string name) {
  beast::tcp_stream s(std::move(sock));
  beast::flat_buffer buf;
  for (;;) {
    http::request<http::string_body> req;
    auto [ec, n] = co_await http::async_read(s, buf, req, kTok);
    if (ec) break;
    ++served()[name];
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

inline asio::awaitable<void> upstream(tcp::acceptor& a, std::string name) {
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
inline asio::awaitable<void> rawConn(tcp::socket sock, Canned answer, bool echo) {
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

inline asio::awaitable<void> rawUpstream(tcp::acceptor& a, Canned answer, bool echo) {
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
inline asio::awaitable<Result<std::vector<Reply>>> exchange(
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

inline http::request<http::string_body> get(std::string host, std::string body = "",
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
      if (id == "sb-private") {
        // A native sandbox's: its traffic token or a session of it.
        Route r{agent_->client(), "traffic-private", ""};
        r.accepts = [](std::string_view t) { return t == "vst_session"; };
        return r;
      }
      if (id == "sb-sleeping" && !awake_) return Route{nullptr, "secret-token", "", true};
      if (id != "sb-1" && id != "sb-2" && id != "sb-tok" && id != "sb-mask" && id != "sb-sleeping")
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
    served().clear();
    proxy_ = std::make_unique<Proxy>("vessel.test:1", std::move(sb), 49983, limits_);
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
  Result<std::vector<Reply>> plain(std::vector<http::request<http::string_body>> reqs,
                                   std::string from = "127.0.0.1") {
    return runFor(
        io_,
        [](asio::io_context& io, uint16_t port, std::vector<http::request<http::string_body>> reqs,
           std::string from) -> asio::awaitable<Result<std::vector<Reply>>> {
          beast::tcp_stream s(io);
          s.socket().open(tcp::v4());
          s.socket().bind(tcp::endpoint(asio::ip::make_address(from), 0));
          auto [ec] = co_await s.async_connect(
              tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), kTok);
          if (ec) co_return Error(Code::kUnavailable, ec.message());
          co_return co_await exchange(s, std::move(reqs));
        }(io_, server_->port(), std::move(reqs), std::move(from)),
        30s);
  }
  // Raw bytes on one connection, and all that comes back until it closes.
  Result<std::string> raw(std::string bytes, std::chrono::seconds bound = 30s) {
    return runFor(
        io_,
        [](asio::io_context& io, uint16_t port,
           std::string bytes) -> asio::awaitable<Result<std::string>> {
          tcp::socket s(io);
          auto [ec] = co_await s.async_connect(
              tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), kTok);
          if (ec) co_return Error(Code::kUnavailable, ec.message());
          auto [wec, wn] = co_await asio::async_write(s, asio::buffer(bytes), kTok);
          if (wec) co_return Error(Code::kUnavailable, "write: " + wec.message());
          std::string got;
          char chunk[4096];
          for (;;) {
            auto [rec, rn] = co_await s.async_read_some(asio::buffer(chunk), kTok);
            got.append(chunk, rn);
            if (rec) break;
          }
          co_return got;
        }(io_, server_->port(), std::move(bytes)),
        bound);
  }

  asio::io_context io_;
  ProxyLimits limits_;
  std::unique_ptr<agentclient::testing::HostAgent> agent_;
  std::unique_ptr<Proxy> proxy_;
  std::unique_ptr<http::HttpServer> server_;
  bool awake_ = false;              // sb-sleeping was woken
  std::vector<std::string> wakes_;  // ids wake was asked for
  std::optional<tcp::acceptor> up1_, up2_;
};

}  // namespace vessel::ingress
