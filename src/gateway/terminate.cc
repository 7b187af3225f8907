// The terminate tier: for a name a credential is bound to, the gateway ends
// the guest's TLS with a leaf from its own CA, opens its own verified TLS to
// the real upstream (SNI and hostname check = the pinned name), checks Host
// on every request, replaces any guest copy of the header with the secret,
// and masks the secret in everything flowing back. It never follows a
// redirect: 3xx responses go to the guest, whose next connection is decided
// afresh (and carries no secret unless its name is credentialed too).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "gateway/gateway.h"
#include "gateway/http_relay.h"

namespace vessel::gateway {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kTok = asio::as_tuple(asio::use_awaitable);
constexpr std::chrono::seconds kHandshakeTimeout{10};

// A stream that first replays the bytes the gateway already read while
// classifying (the ClientHello), then reads the socket: the TLS server
// engine must see the hello from its first byte.
class PrefixedSocket {
 public:
  using executor_type = tcp::socket::executor_type;
  using lowest_layer_type = tcp::socket::lowest_layer_type;
  PrefixedSocket(tcp::socket& s, std::string prefix) : s_(s), prefix_(std::move(prefix)) {}
  executor_type get_executor() { return s_.get_executor(); }
  lowest_layer_type& lowest_layer() { return s_.lowest_layer(); }

  template <class Buffers, class Token>
  auto async_read_some(const Buffers& b, Token&& token) {
    return asio::async_initiate<Token, void(boost::system::error_code, size_t)>(
        [this](auto handler, const Buffers& b) {
          if (prefix_.empty()) {
            s_.async_read_some(b, std::move(handler));
            return;
          }
          size_t n = asio::buffer_copy(b, asio::buffer(prefix_));
          prefix_.erase(0, n);
          auto ex = asio::get_associated_executor(handler, s_.get_executor());
          asio::post(ex, [h = std::move(handler), n]() mutable { h({}, n); });
        },
        token, b);
  }
  template <class Buffers, class Token>
  auto async_write_some(const Buffers& b, Token&& token) {
    return s_.async_write_some(b, std::forward<Token>(token));
  }

 private:
  tcp::socket& s_;
  std::string prefix_;
};

template <class Stream>
asio::awaitable<boost::system::error_code> handshakeWithin(
    asio::io_context& io, Stream& s, asio::ssl::stream_base::handshake_type t) {
  asio::steady_timer timer(io, kHandshakeTimeout);
  auto r = co_await (s.async_handshake(t, kTok) || timer.async_wait(kTok));
  if (r.index() == 1) co_return asio::error::timed_out;
  co_return std::get<0>(std::get<0>(r));
}

}  // namespace

asio::awaitable<void> Gateway::terminate(Flow& f, tcp::socket& guest, tcp::socket& up_sock,
                                         std::string hello, std::optional<policy::Credential> cred,
                                         TimePoint* last_active) {
  // Upstream first: no leaf is minted and no guest handshake is finished for
  // a name whose real server does not verify.
  asio::ssl::stream<tcp::socket&> up(up_sock, *upstream_tls_);
  SSL_set_tlsext_host_name(up.native_handle(), f.name.c_str());
  SSL_set1_host(up.native_handle(), f.name.c_str());
  if (auto ec = co_await handshakeWithin(io_, up, asio::ssl::stream_base::client)) {
    deny(f, "upstream-tls:" + credentials::opensslError(ec.message()));
    co_return;
  }
  auto ctx = ca_->serverContext(f.name);
  if (!ctx.ok()) {
    deny(f, "mint-failed:" + ctx.error().message());
    co_return;
  }
  PrefixedSocket prefixed(guest, std::move(hello));
  asio::ssl::stream<PrefixedSocket&> gs(prefixed, **ctx);
  if (auto ec = co_await handshakeWithin(io_, gs, asio::ssl::stream_base::server)) {
    deny(f, "guest-tls:" + ec.message());
    co_return;
  }
  RequestRules rules{f.name,
                     f.port,
                     cred ? &*cred : nullptr,
                     [this, &f, &guest, &up_sock](std::string_view why) {
                       deny(f, why);
                       resetSocket(guest);
                       resetSocket(up_sock);
                     },
                     [&up_sock] {
                       boost::system::error_code ec;
                       up_sock.shutdown(tcp::socket::shutdown_send, ec);
                     },
                     [this, &f](std::string_view why) { deny(f, why); },
                     last_active};
  std::optional<std::vector<std::string>> secrets;
  if (cred) secrets = credentials::secretForms(cred->value);
  co_await relayHttp(gs, up, guest, std::string(), std::move(rules), std::move(secrets));
}

}  // namespace vessel::gateway
