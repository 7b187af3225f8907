// The forwarder to an https:// upstream (an API replica's envd listener to
// a node's TLS envd): a real TLS upstream (TlsTerminator, a CA made by the
// openssl CLI), fronts whose client context trusts that CA or another. The
// trusted front relays; the other answers 502 without the upstream ever
// seeing the request.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "http/forward.h"
#include "http/server.h"
#include "http/testing/test_pki.h"
#include "http/tls.h"
#include "http/tls_client.h"

namespace vessel::http {
namespace {

namespace beast = boost::beast;
using tcp = asio::ip::tcp;

class ForwardTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("vessel-fwd-tls-" + std::to_string(::getpid()));
    ASSERT_TRUE(testing::makeTestPki(dir_ / "a", "ca-a", "node-a", "IP:127.0.0.1", &a_));
    ASSERT_TRUE(testing::makeTestPki(dir_ / "b", "ca-b", "node-b", "IP:127.0.0.1", &b_));
    auto ctx = serverContextFromFiles(a_.cert, a_.key);
    ASSERT_TRUE(ctx.ok()) << ctx.error().message();
    upstream_.route(http::verb::get, "/who", [this](const Request& r) -> asio::awaitable<Response> {
      ++seen_;
      co_return jsonResponse(r, http::status::ok, R"({"who":"tls-upstream"})");
    });
    auto t = TlsTerminator::create(threads_, [c = *ctx](const std::string&) { return c; });
    ASSERT_TRUE(t.ok()) << t.error().message();
    terminator_ = std::move(*t);
    terminator_->install(upstream_, TlsMode::kOnly);
    ASSERT_TRUE(upstream_.listen({"127.0.0.1", 0}).ok());
    for (auto [front, ca] : {std::pair{&trusting_, a_.ca}, std::pair{&other_, b_.ca}}) {
      ForwardLimits limits;
      auto client = clientContext(ca);
      ASSERT_TRUE(client.ok()) << client.error().message();
      limits.tls = *client;
      front->forwardWhen(
          [this](const http::request_header<>&) -> std::optional<Upstream> {
            return Upstream{"127.0.0.1", upstream_.port(), true};
          },
          limits);
      ASSERT_TRUE(front->listen({"127.0.0.1", 0}).ok());
    }
    // A front without a TLS client: an https:// upstream is refused.
    untrusting_.forwardWhen([this](const http::request_header<>&) -> std::optional<Upstream> {
      return Upstream{"127.0.0.1", upstream_.port(), true};
    });
    ASSERT_TRUE(untrusting_.listen({"127.0.0.1", 0}).ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    if (thread_.joinable()) {
      asio::post(io_, [this] {
        for (auto* s : {&upstream_, &trusting_, &other_, &untrusting_}) s->close();
      });
      io_.stop();
      thread_.join();
    }
    std::filesystem::remove_all(dir_);
  }
  // Two GETs on one keep-alive connection to `front`.
  std::vector<http::response<http::string_body>> twice(HttpServer& front) {
    asio::io_context cio;
    tcp::socket sock(cio);
    sock.connect({asio::ip::make_address("127.0.0.1"), front.port()});
    beast::flat_buffer buf;
    std::vector<http::response<http::string_body>> out;
    for (int i = 0; i < 2; ++i) {
      std::string raw = "GET /who HTTP/1.1\r\nHost: sb.example\r\n\r\n";
      asio::write(sock, asio::buffer(raw));
      http::response<http::string_body> res;
      boost::system::error_code ec;
      http::read(sock, buf, res, ec);
      if (ec) break;
      out.push_back(std::move(res));
      if (!out.back().keep_alive()) break;
    }
    return out;
  }

  std::filesystem::path dir_;
  testing::TestPki a_, b_;
  asio::io_context io_;
  HttpServer upstream_{io_};
  HttpServer trusting_{io_}, other_{io_}, untrusting_{io_};
  TlsThreads threads_{2};
  std::unique_ptr<TlsTerminator> terminator_;
  std::thread thread_;
  std::atomic<int> seen_{0};
};

TEST_F(ForwardTlsTest, AnHttpsUpstreamIsVerifiedBeforeAnyRequestReachesIt) {
  auto ok = twice(trusting_);
  ASSERT_EQ(ok.size(), 2u);
  for (const auto& r : ok) {
    EXPECT_EQ(r.result(), http::status::ok);
    EXPECT_NE(r.body().find("tls-upstream"), std::string::npos) << r.body();
  }
  EXPECT_EQ(seen_.load(), 2);

  auto refused = twice(other_);
  ASSERT_EQ(refused.size(), 1u) << "a 502 closes the client's connection";
  EXPECT_EQ(refused[0].result(), http::status::bad_gateway);
  EXPECT_NE(refused[0].body().find("certificate verify failed"), std::string::npos)
      << refused[0].body();
  auto plain = twice(untrusting_);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].result(), http::status::bad_gateway);
  EXPECT_EQ(seen_.load(), 2) << "an unverified upstream never saw a request";
}

}  // namespace
}  // namespace vessel::http
