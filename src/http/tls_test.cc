// TLS on the one HTTP server (http/tls.h) with real certificates (the
// openssl CLI) and real TLS clients: the pair served, plain HTTP refused
// on a TLS-only listener, a wrong CA refused by the client, the
// certificate chosen off the io thread, a reload that new connections see
// and open ones survive, and a peer stalled mid-handshake that stalls
// nobody and is dropped at the handshake timeout.
#include "http/tls.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <filesystem>
#include <mutex>
#include <thread>

#include "http/server.h"
#include "http/testing/test_pki.h"

namespace vessel::http {
namespace {

namespace ssl = asio::ssl;
using ::testing::HasSubstr;
using tcp = asio::ip::tcp;

// Every blocking read or write of the test's clients gives up after this
// (a hung server fails the test instead of hanging it).
void bound(tcp::socket& s, int seconds = 60) {
  timeval tv{seconds, 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// One TLS connection of a client that trusts `ca`.
struct TlsClient {
  asio::io_context io;
  ssl::context ctx{ssl::context::tls_client};
  std::unique_ptr<ssl::stream<tcp::socket>> s;
  boost::beast::flat_buffer buf;

  // The handshake's error, if any.
  boost::system::error_code open(uint16_t port, const std::string& ca) {
    boost::system::error_code ec;
    ctx.load_verify_file(ca, ec);
    if (ec) return ec;
    ctx.set_verify_mode(ssl::verify_peer);
    s = std::make_unique<ssl::stream<tcp::socket>>(io, ctx);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s->native_handle()), "127.0.0.1");
    s->lowest_layer().connect({asio::ip::make_address("127.0.0.1"), port}, ec);
    if (ec) return ec;
    bound(s->next_layer());
    s->handshake(ssl::stream_base::client, ec);
    return ec;
  }
  // GET `target` on this connection (kept alive); the response.
  Response get(const std::string& target) {
    Request req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1");
    http::write(*s, req);
    Response res;
    http::read(*s, buf, res);
    return res;
  }
  // The common name of the certificate the server presented.
  std::string peerName() {
    X509* cert = SSL_get1_peer_certificate(s->native_handle());
    if (!cert) return "";
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    X509_free(cert);
    return cn;
  }
};

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("vessel-tls-" + std::to_string(::getpid()));
    ASSERT_TRUE(testing::makeTestPki(dir_ / "a", "ca-a", "vessel-a", "IP:127.0.0.1", &a_));
    ASSERT_TRUE(testing::makeTestPki(dir_ / "b", "ca-b", "vessel-b", "IP:127.0.0.1", &b_));
    auto ctx = serverContextFromFiles(a_.cert, a_.key);
    ASSERT_TRUE(ctx.ok()) << ctx.error().message();
    current_ = *ctx;
    server_.route(http::verb::get, "/hello", [](const Request& r) -> asio::awaitable<Response> {
      co_return jsonResponse(r, http::status::ok, R"({"hello":"tls"})");
    });
  }
  // TLS only on the server, then it listens.
  void start(TlsOptions o = {}) {
    auto t = TlsTerminator::create(
        threads_,
        [this](const std::string&) {
          std::lock_guard lock(mu_);
          chose_on_ = std::this_thread::get_id();
          return current_;
        },
        o);
    ASSERT_TRUE(t.ok()) << t.error().message();
    terminator_ = std::move(*t);
    terminator_->install(server_, TlsMode::kOnly);
    ASSERT_TRUE(server_.listen({"127.0.0.1", 0}).ok());
    thread_ = std::thread([this] { io_.run(); });
    io_thread_ = thread_.get_id();
  }
  void TearDown() override {
    if (thread_.joinable()) {
      asio::post(io_, [this] { server_.close(); });
      io_.stop();
      thread_.join();
    }
    std::filesystem::remove_all(dir_);
  }
  void serve(std::shared_ptr<ssl::context> ctx) {
    std::lock_guard lock(mu_);
    current_ = std::move(ctx);
  }

  std::filesystem::path dir_;
  testing::TestPki a_, b_;
  std::mutex mu_;
  std::shared_ptr<ssl::context> current_;  // guarded by mu_
  std::thread::id chose_on_;               // guarded by mu_
  asio::io_context io_;
  HttpServer server_{io_};
  TlsThreads threads_{2};
  std::unique_ptr<TlsTerminator> terminator_;
  std::thread thread_;
  std::thread::id io_thread_;
};

TEST_F(TlsTest, ServesTheConfiguredPairAndChoosesOffTheIoThread) {
  start();
  TlsClient c;
  ASSERT_FALSE(c.open(server_.port(), a_.ca)) << "handshake failed";
  EXPECT_EQ(c.peerName(), "vessel-a");
  Response r = c.get("/hello");
  EXPECT_EQ(r.result(), http::status::ok);
  EXPECT_EQ(r.body(), R"({"hello":"tls"})");
  // Keep-alive over TLS: a second request on the same connection.
  EXPECT_EQ(c.get("/hello").result(), http::status::ok);
  std::lock_guard lock(mu_);
  EXPECT_NE(chose_on_, std::thread::id());
  EXPECT_NE(chose_on_, io_thread_) << "the certificate was chosen on the listener's io thread";
}

TEST_F(TlsTest, TlsOnlyListenerSpeaksNoPlainHttp) {
  start();
  asio::io_context cio;
  tcp::socket s(cio);
  s.connect({asio::ip::make_address("127.0.0.1"), server_.port()});
  bound(s);
  asio::write(s, asio::buffer(std::string("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")));
  std::string got;
  char buf[4096];
  boost::system::error_code ec;
  for (;;) {
    size_t n = s.read_some(asio::buffer(buf), ec);
    if (ec) break;
    got.append(buf, n);
  }
  EXPECT_NE(ec, asio::error::would_block) << "the server neither answered nor closed";
  EXPECT_EQ(got.find("HTTP/1.1"), std::string::npos) << got;
  EXPECT_THAT(got, ::testing::Not(HasSubstr("hello")));
}

TEST_F(TlsTest, AClientTrustingAnotherCaRefusesTheServer) {
  start();
  TlsClient c;
  auto ec = c.open(server_.port(), b_.ca);
  ASSERT_TRUE(ec);
  EXPECT_THAT(ec.message(), HasSubstr("certificate verify failed"));
}

TEST_F(TlsTest, ReloadServesTheNewPairAndOpenConnectionsKeepTheirs) {
  start();
  TlsClient old;
  ASSERT_FALSE(old.open(server_.port(), a_.ca));
  EXPECT_EQ(old.get("/hello").result(), http::status::ok);
  auto fresh = serverContextFromFiles(b_.cert, b_.key);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message();
  serve(*fresh);
  TlsClient now;
  ASSERT_FALSE(now.open(server_.port(), b_.ca));
  EXPECT_EQ(now.peerName(), "vessel-b");
  EXPECT_EQ(now.get("/hello").result(), http::status::ok);
  // The connection from before the reload goes on with its certificate.
  EXPECT_EQ(old.peerName(), "vessel-a");
  EXPECT_EQ(old.get("/hello").result(), http::status::ok);
  // And a client that trusts only the old CA refuses the new certificate.
  TlsClient stale;
  EXPECT_TRUE(stale.open(server_.port(), a_.ca));
}

// Half a ClientHello, then silence: the handshake waits on this peer.
struct StalledPeer {
  asio::io_context io;
  tcp::socket s{io};
  explicit StalledPeer(uint16_t port) {
    s.connect({asio::ip::make_address("127.0.0.1"), port});
    bound(s, 120);
    // A handshake record announcing 512 bytes, and 6 of them.
    static const unsigned char kPart[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01,
                                          0x00, 0x01, 0xfc, 0x03, 0x03};
    asio::write(s, asio::buffer(kPart, sizeof kPart));
  }
  // Whether the server closed the connection (before the socket's bound).
  bool closedByServer() {
    char buf[64];
    boost::system::error_code ec;
    for (;;) {
      s.read_some(asio::buffer(buf), ec);
      if (ec) return ec != asio::error::would_block && ec != asio::error::try_again;
    }
  }
};

TEST_F(TlsTest, AStalledHandshakeStallsNobodyElse) {
  TlsOptions o;
  o.handshake_timeout = std::chrono::hours(1);  // only the test ends it
  start(o);
  StalledPeer stalled(server_.port());
  // Its handshake is in flight (counted when the listener hands it over).
  for (int i = 0; i < 600 && terminator_->handshakes() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(terminator_->handshakes(), 1u);
  // Others' handshakes and requests complete meanwhile, one after another
  // and side by side.
  for (int i = 0; i < 3; ++i) {
    TlsClient c;
    ASSERT_FALSE(c.open(server_.port(), a_.ca));
    EXPECT_EQ(c.get("/hello").result(), http::status::ok);
  }
  std::vector<std::thread> many;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    many.emplace_back([&] {
      TlsClient c;
      if (!c.open(server_.port(), a_.ca) && c.get("/hello").result() == http::status::ok) ++ok;
    });
  for (auto& t : many) t.join();
  EXPECT_EQ(ok.load(), 4);
  // The stalled handshake is still waiting: the others did not wait for it.
  EXPECT_EQ(terminator_->handshakes(), 1u);
}

TEST_F(TlsTest, AStalledHandshakeIsDroppedAtTheTimeout) {
  TlsOptions o;
  o.handshake_timeout = std::chrono::milliseconds(500);
  start(o);
  StalledPeer stalled(server_.port());
  EXPECT_TRUE(stalled.closedByServer());
  for (int i = 0; i < 600 && terminator_->handshakes() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(terminator_->handshakes(), 0u);
  // The listener still serves.
  TlsClient c;
  ASSERT_FALSE(c.open(server_.port(), a_.ca));
  EXPECT_EQ(c.get("/hello").result(), http::status::ok);
}

TEST_F(TlsTest, HandshakesOverTheCapAreClosed) {
  TlsOptions o;
  o.handshake_timeout = std::chrono::hours(1);
  o.max_handshakes = 1;
  start(o);
  StalledPeer first(server_.port());
  for (int i = 0; i < 600 && terminator_->handshakes() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(terminator_->handshakes(), 1u);
  StalledPeer second(server_.port());
  EXPECT_TRUE(second.closedByServer());
  EXPECT_EQ(terminator_->handshakes(), 1u);
}

TEST_F(TlsTest, OnePeerGetsOnlyItsShareOfHandshakes) {
  TlsOptions o;
  o.handshake_timeout = std::chrono::hours(1);
  o.max_handshakes = 8;
  o.max_handshakes_per_peer = 2;
  start(o);
  StalledPeer first(server_.port()), second(server_.port());
  for (int i = 0; i < 600 && terminator_->handshakes() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(terminator_->handshakes(), 2u);
  StalledPeer third(server_.port());  // the same address, over its share
  EXPECT_TRUE(third.closedByServer());
  EXPECT_EQ(terminator_->handshakes(), 2u);
}

TEST(TlsFilesTest, UnreadableOrMismatchedPairsSayWhich) {
  auto dir = std::filesystem::temp_directory_path() / ("vessel-tlsf-" + std::to_string(::getpid()));
  testing::TestPki a, b;
  ASSERT_TRUE(testing::makeTestPki(dir / "a", "ca-a", "a", "DNS:a.test", &a));
  ASSERT_TRUE(testing::makeTestPki(dir / "b", "ca-b", "b", "DNS:b.test", &b));
  EXPECT_TRUE(serverContextFromFiles(a.cert, a.key).ok());
  auto mismatched = serverContextFromFiles(a.cert, b.key);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_THAT(mismatched.error().message(),
              HasSubstr("TLS key " + b.key + " is not the key of certificate " + a.cert));
  auto missing = serverContextFromFiles((dir / "nope.crt").string(), a.key);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().message(),
              HasSubstr("TLS certificate " + (dir / "nope.crt").string()));
  auto swapped = serverContextFromFiles(a.key, a.cert);
  ASSERT_FALSE(swapped.ok());
  EXPECT_THAT(swapped.error().message(), HasSubstr("no PEM certificate"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vessel::http
