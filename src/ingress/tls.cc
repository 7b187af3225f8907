#include "ingress/tls.h"

#include <openssl/ssl.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "base/fd.h"
#include "base/log.h"
#include "gateway/credentials/ca.h"
#include "ingress/host.h"

namespace vessel::ingress {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto kTok = asio::as_tuple(asio::use_awaitable);
constexpr std::chrono::seconds kHandshakeTimeout{10};

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

struct TlsFront::Contexts {
  std::shared_ptr<asio::ssl::context> base;
  static int onServerName(SSL* ssl, int*, void* arg) {
    auto* self = static_cast<TlsFront*>(arg);
    const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (!sni) return SSL_TLSEXT_ERR_OK;  // the domain's own certificate
    auto ctx = self->ca_->serverContext(self->certificateName(sni));
    if (ctx.ok()) SSL_set_SSL_CTX(ssl, (*ctx)->native_handle());
    return SSL_TLSEXT_ERR_OK;
  }
};

TlsFront::TlsFront(asio::io_context& io, std::string domain)
    : io_(io), domain_(hostName(domain)), ctx_(std::make_unique<Contexts>()) {}

TlsFront::~TlsFront() = default;

Result<std::unique_ptr<TlsFront>> TlsFront::create(asio::io_context& io,
                                                   const std::string& state_dir,
                                                   std::string domain) {
  std::unique_ptr<TlsFront> t(new TlsFront(io, std::move(domain)));
  for (char c : t->domain_)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
      return Error(Code::kInvalidArgument, "sandbox domain '" + t->domain_ + "' is not a DNS name");
  if (t->domain_.empty()) return Error(Code::kInvalidArgument, "empty sandbox domain");
  VESSEL_ASSIGN_OR_RETURN(auto ca,
                          gateway::credentials::CertificateAuthority::loadOrCreate(
                              state_dir + "/ingress-ca", "Vessel sandbox ingress CA", t->domain_));
  t->ca_ = std::make_unique<gateway::credentials::CertificateAuthority>(std::move(ca));
  t->ca_path_ = state_dir + "/ingress-ca.pem";
  // The file clients point at: rewritten from the CA on every start.
  VESSEL_TRY_CTX(writeFileAtomic(t->ca_path_, t->ca_->certificatePem(), 0644),
                 "write " + t->ca_path_);
  VESSEL_ASSIGN_OR_RETURN(t->ctx_->base, t->ca_->serverContext(t->domain_));
  SSL_CTX* base = t->ctx_->base->native_handle();
  SSL_CTX_set_tlsext_servername_callback(base, &Contexts::onServerName);
  SSL_CTX_set_tlsext_servername_arg(base, t.get());
  return t;
}

std::string TlsFront::certificateName(const std::string& server_name) const {
  std::string name = hostName(server_name);
  if (name == domain_ || parseSandboxHost(name, domain_)) return name;
  return domain_;
}

void TlsFront::install(http::HttpServer& server) {
  server.onTls([this, &server](tcp::socket sock) {
    tcp::endpoint plain = server.localEndpoint();
    // A listener on every address is reached on loopback.
    if (plain.address().is_unspecified())
      plain.address(plain.address().is_v6() ? asio::ip::address(asio::ip::address_v6::loopback())
                                            : asio::ip::address(asio::ip::address_v4::loopback()));
    serve(std::move(sock), plain);
  });
}

void TlsFront::serve(tcp::socket sock, tcp::endpoint plain) {
  auto run = [](asio::io_context& io, tcp::socket sock, tcp::endpoint plain,
                std::shared_ptr<asio::ssl::context> ctx) -> asio::awaitable<void> {
    asio::ssl::stream<tcp::socket> tls(std::move(sock), *ctx);
    asio::steady_timer timer(io, kHandshakeTimeout);
    auto hs = co_await (tls.async_handshake(asio::ssl::stream_base::server, kTok) ||
                        timer.async_wait(kTok));
    if (hs.index() != 0 || std::get<0>(std::get<0>(hs))) co_return;
    tcp::socket up(io);
    auto [cec] = co_await up.async_connect(plain, kTok);
    if (cec) {
      Logger("ingress").warn("https: cannot reach the listener's plain side: {}", cec.message());
      co_return;
    }
    // Named: g++ 12 destroys a prvalue argument of a coroutine twice.
    auto close_up = [&up] {
      boost::system::error_code ec;
      up.shutdown(tcp::socket::shutdown_send, ec);
    };
    auto close_tls = [&tls] {
      boost::system::error_code ec;
      tls.lowest_layer().shutdown(tcp::socket::shutdown_send, ec);
    };
    co_await (pipe(tls, up, close_up) && pipe(up, tls, close_tls));
  };
  asio::co_spawn(io_, run(io_, std::move(sock), plain, ctx_->base), asio::detached);
}

}  // namespace vessel::ingress
