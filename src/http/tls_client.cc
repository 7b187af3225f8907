#include "http/tls_client.h"

#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>

#include "base/fd.h"

namespace vessel::http {

namespace ssl = boost::asio::ssl;

Result<std::shared_ptr<ssl::context>> clientContext(const std::string& ca_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx->native_handle(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  boost::system::error_code ec;
  if (ca_file.empty()) {
    ctx->set_default_verify_paths(ec);
    if (ec) return Error(Code::kInternal, "TLS: the system's trust store: " + ec.message());
  } else {
    // Read here, so a missing file is said at start-up rather than as a
    // handshake that fails later. A bundle of several CAs is fine.
    auto pem = readFile(ca_file, 4 << 20);
    if (!pem.ok()) return std::move(pem).error().withContext("CA file " + ca_file);
    ctx->add_certificate_authority(boost::asio::buffer(*pem), ec);
    if (ec)
      return Error(Code::kInvalidArgument,
                   "CA file " + ca_file + ": no PEM certificate in it (" + ec.message() + ")");
  }
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

void expectServer(SSL* s, const std::string& host) {
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(host, ec);
  if (ec) {
    SSL_set_tlsext_host_name(s, host.c_str());
    SSL_set1_host(s, host.c_str());
  } else {
    // An IP literal: no SNI (RFC 6066 forbids it), the certificate must
    // name the address.
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), host.c_str());
  }
}

std::string handshakeError(SSL* s, const boost::system::error_code& ec) {
  long verdict = SSL_get_verify_result(s);
  if (verdict != X509_V_OK)
    return std::string("certificate verify failed: ") + X509_verify_cert_error_string(verdict);
  return ec.message();
}

}  // namespace vessel::http
