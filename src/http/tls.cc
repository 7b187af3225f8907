#include "http/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <map>
#include <mutex>

#include "base/fd.h"
#include "base/log.h"
#include "http/server.h"

namespace vessel::http {

namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto kTok = asio::as_tuple(asio::use_awaitable);
// After the listener's side ended a relayed connection, how long the
// client has to end its side before the TLS side is closed for it.
constexpr std::chrono::seconds kLinger{30};

int selectHttp11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                 unsigned int inlen, void*) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* sel = nullptr;
  if (SSL_select_next_proto(&sel, outlen, kHttp11, sizeof kHttp11, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // a client that offers only h2: no common protocol
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

// "<what>: <first OpenSSL error>", clearing OpenSSL's error queue.
std::string sslError(const std::string& what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown error";
  if (e) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return what + ": " + buf;
}

template <typename From, typename To, typename CloseTo>
asio::awaitable<void> pipe(From& from, To& to, CloseTo close_to) {
  std::vector<char> buf(64 * 1024);
  for (;;) {
    auto [ec, n] = co_await from.async_read_some(asio::buffer(buf), kTok);
    if (ec) break;
    auto [wec, wn] = co_await asio::async_write(to, asio::buffer(buf.data(), n), kTok);
    if (wec) break;
  }
  // The other side hears the end (a half-close; the reverse direction
  // keeps flowing until it ends too).
  close_to();
}

}  // namespace

void hardenServerContext(ssl::context& ctx) {
  SSL_CTX* s = ctx.native_handle();
  SSL_CTX_set_min_proto_version(s, TLS1_2_VERSION);
  SSL_CTX_set_options(
      s, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // TLS 1.2: forward secrecy and AEAD only (TLS 1.3's suites are all that).
  SSL_CTX_set_cipher_list(s,
                          "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                          "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                          "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305");
  SSL_CTX_set_alpn_select_cb(s, selectHttp11, nullptr);
}

Result<std::shared_ptr<ssl::context>> serverContextFromFiles(const std::string& cert,
                                                             const std::string& key) {
  // Read first, so a missing or unreadable file is said plainly.
  auto cert_pem = readFile(cert, 1 << 20);
  if (!cert_pem.ok()) return std::move(cert_pem).error().withContext("TLS certificate " + cert);
  auto key_pem = readFile(key, 1 << 20);
  if (!key_pem.ok()) return std::move(key_pem).error().withContext("TLS key " + key);
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  hardenServerContext(*ctx);
  boost::system::error_code ec;
  ERR_clear_error();
  ctx->use_certificate_chain(asio::buffer(*cert_pem), ec);
  if (ec)
    return Error(Code::kInvalidArgument,
                 "TLS certificate " + cert + ": no PEM certificate in it (" + ec.message() + ")");
  ctx->use_private_key(asio::buffer(*key_pem), ssl::context::pem, ec);
  if (ec) {
    // A key OpenSSL can read but will not take is another certificate's.
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(
        BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size())), &BIO_free);
    EVP_PKEY* pkey = bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr;
    ERR_clear_error();
    if (!pkey)
      return Error(Code::kInvalidArgument,
                   "TLS key " + key + ": no PEM private key in it (" + ec.message() + ")");
    EVP_PKEY_free(pkey);
    return Error(Code::kInvalidArgument,
                 "TLS key " + key + " is not the key of certificate " + cert);
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    return Error(Code::kInvalidArgument,
                 sslError("TLS key " + key + " is not the key of certificate " + cert));
  return ctx;
}

TlsThreads::TlsThreads(size_t threads) : work_(asio::make_work_guard(io_)) {
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i)
    threads_.emplace_back([this] { io_.run(); });
}

TlsThreads::~TlsThreads() {
  work_.reset();
  io_.stop();
  for (auto& t : threads_) t.join();
}

struct TlsTerminator::Shared {
  CertificateChooser choose;
  TlsOptions opts;
  // Settings only: every handshake starts here and takes the chooser's
  // certificate once its server name is known (onServerName).
  ssl::context dispatch{ssl::context::tls_server};
  std::atomic<size_t> handshakes{0};
  std::map<asio::ip::address, size_t> handshaking;  // per peer, guarded by mu
  // The relay's connections to the plain side, by their local end, and the
  // peer each relays for. Written on the TLS threads, read on the
  // listener's io thread.
  mutable std::mutex mu;
  std::map<tcp::endpoint, asio::ip::address> relayed;  // guarded by mu

  static int onServerName(SSL* ssl, int* alert, void* arg) {
    auto* self = static_cast<Shared*>(arg);
    const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    std::shared_ptr<ssl::context> ctx = self->choose(sni ? std::string(sni) : std::string());
    if (!ctx) {
      *alert = SSL_AD_UNRECOGNIZED_NAME;
      return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    // The SSL holds a reference to its SSL_CTX from here: a context the
    // chooser later drops (a reload) lives as long as this connection.
    SSL_set_SSL_CTX(ssl, ctx->native_handle());
    return SSL_TLSEXT_ERR_OK;
  }
  // A handshake from `peer` may start (within both caps), or not.
  bool admit(const asio::ip::address& peer) {
    std::lock_guard lock(mu);
    size_t& mine = handshaking[peer];
    if (handshakes >= opts.max_handshakes || mine >= opts.max_handshakes_per_peer) {
      if (mine == 0) handshaking.erase(peer);
      return false;
    }
    ++mine;
    ++handshakes;
    return true;
  }
  void release(const asio::ip::address& peer) {
    std::lock_guard lock(mu);
    if (auto it = handshaking.find(peer); it != handshaking.end() && --it->second == 0)
      handshaking.erase(it);
    --handshakes;
  }
  std::optional<asio::ip::address> peerOf(const tcp::endpoint& remote) const {
    std::lock_guard lock(mu);
    auto it = relayed.find(remote);
    if (it == relayed.end()) return std::nullopt;
    return it->second;
  }
};

Result<std::unique_ptr<TlsTerminator>> TlsTerminator::create(TlsThreads& threads,
                                                             CertificateChooser choose,
                                                             TlsOptions o) {
  if (!choose) return Error(Code::kInvalidArgument, "TLS: no certificate chooser");
  std::unique_ptr<TlsTerminator> t(new TlsTerminator(threads));
  t->s_ = std::make_shared<Shared>();
  t->s_->choose = std::move(choose);
  t->s_->opts = o;
  hardenServerContext(t->s_->dispatch);
  SSL_CTX* d = t->s_->dispatch.native_handle();
  SSL_CTX_set_tlsext_servername_callback(d, &Shared::onServerName);
  SSL_CTX_set_tlsext_servername_arg(d, t->s_.get());
  return t;
}

TlsTerminator::~TlsTerminator() = default;

size_t TlsTerminator::handshakes() const { return s_->handshakes.load(); }

void TlsTerminator::install(HttpServer& server, TlsMode mode) {
  server.onTls(
      [this, &server](tcp::socket sock) {
        tcp::endpoint plain = server.localEndpoint();
        // A listener on every address is reached on loopback.
        if (plain.address().is_unspecified())
          plain.address(plain.address().is_v6()
                            ? asio::ip::address(asio::ip::address_v6::loopback())
                            : asio::ip::address(asio::ip::address_v4::loopback()));
        serve(std::move(sock), plain);
      },
      mode == TlsMode::kOnly);
  // What the plain side counts a relayed connection against: its peer.
  server.peerResolver([s = s_](const tcp::endpoint& remote) { return s->peerOf(remote); });
}

namespace {

// One TLS connection on the TLS threads (its strand): the handshake,
// bounded, then the relay to the plain side both ways.
asio::awaitable<void> terminate(std::shared_ptr<TlsTerminator::Shared> s, tcp::socket sock,
                                tcp::endpoint plain, asio::ip::address peer);

}  // namespace

void TlsTerminator::serve(tcp::socket sock, tcp::endpoint plain) {
  boost::system::error_code ec;
  asio::ip::address peer = sock.remote_endpoint(ec).address();
  if (ec || !s_->admit(peer)) return;  // closed with `sock`, nothing read or sent
  // The socket moves to the TLS threads: from here nothing of this
  // connection runs on the listener's io thread.
  tcp::endpoint local = sock.local_endpoint(ec);
  auto fd = ec ? -1 : sock.release(ec);
  if (ec || fd < 0) {
    s_->release(peer);
    return;
  }
  auto strand = asio::make_strand(threads_.io());
  tcp::socket moved(strand);
  moved.assign(local.protocol(), fd, ec);
  if (ec) {
    ::close(fd);
    s_->release(peer);
    return;
  }
  asio::co_spawn(strand, terminate(s_, std::move(moved), plain, peer), asio::detached);
}

namespace {

// Long because the connection's steps (handshake with its timeout, the
// relay socket bound and registered, the two pipes, the linger) share its
// state and read best in order.
asio::awaitable<void> terminate(std::shared_ptr<TlsTerminator::Shared> s, tcp::socket sock,
                                tcp::endpoint plain, asio::ip::address peer) {
  auto ex = co_await asio::this_coro::executor;
  auto tls = std::make_shared<ssl::stream<tcp::socket>>(std::move(sock), s->dispatch);
  std::weak_ptr<ssl::stream<tcp::socket>> weak = tls;
  auto close_tls_now = [weak] {
    if (auto t = weak.lock()) {
      boost::system::error_code ec;
      t->lowest_layer().cancel(ec);
      t->lowest_layer().shutdown(tcp::socket::shutdown_both, ec);
    }
  };
  asio::steady_timer timer(ex, s->opts.handshake_timeout);
  // Same strand as the handshake: the timer's handler never races it.
  timer.async_wait([close_tls_now](boost::system::error_code ec) {
    if (!ec) close_tls_now();
  });
  auto [hec] = co_await tls->async_handshake(ssl::stream_base::server, kTok);
  timer.cancel();
  s->release(peer);
  if (hec) co_return;
  tcp::socket up(ex);
  // Bound first: the plain side learns whom this connection is for
  // before it accepts it (and, in kOnly mode, that it is the relay's).
  boost::system::error_code bec;
  up.open(plain.protocol(), bec);
  if (!bec) up.bind(tcp::endpoint(plain.address(), 0), bec);
  tcp::endpoint local = bec ? tcp::endpoint() : up.local_endpoint(bec);
  if (bec) co_return;
  {
    std::lock_guard lock(s->mu);
    s->relayed[local] = peer;
  }
  auto forget = [&s, local] {
    std::lock_guard lock(s->mu);
    s->relayed.erase(local);
  };
  auto [cec] = co_await up.async_connect(plain, kTok);
  if (cec) {
    forget();
    Logger("http").warn("https: cannot reach the listener's plain side: {}", cec.message());
    co_return;
  }
  boost::system::error_code nd;
  up.set_option(tcp::no_delay(true), nd);
  tls->lowest_layer().set_option(tcp::no_delay(true), nd);
  // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
  auto close_up = [&up] {
    boost::system::error_code ec;
    up.shutdown(tcp::socket::shutdown_send, ec);
  };
  asio::steady_timer linger(ex);
  auto close_tls = [&tls, &linger, close_tls_now] {
    boost::system::error_code ec;
    tls->lowest_layer().shutdown(tcp::socket::shutdown_send, ec);
    // A client that never ends its side would hold this coroutine forever.
    linger.expires_after(kLinger);
    linger.async_wait([close_tls_now](boost::system::error_code lec) {
      if (!lec) close_tls_now();
    });
  };
  co_await (pipe(*tls, up, close_up) && pipe(up, *tls, close_tls));
  linger.cancel();
  forget();
}

}  // namespace

}  // namespace vessel::http
