#pragma once
// HTTPS for sandbox ports (E2B's SDKs and tests fetch
// `https://${sandbox.getHost(port)}`): the certificates a handshake on the
// envd listener presents for the name the client asked for (SNI), minted
// by Vessel's ingress CA. The TLS itself is the HTTP server's
// (http/tls.h): handshakes and minting run on its TLS threads, and the
// decrypted bytes reach the listener's plain side, so routing (proxy.h,
// envd) exists once. Without operator TLS (vesseld --tls-cert) the
// listener tells TLS from plain HTTP by the first byte (install()); with
// it, the listener is TLS only and chooser() serves sandbox names here and
// every other name the operator's certificate.
//
// The CA is made on the first start in <state dir>/ingress-ca/ (key 0600)
// and its certificate copied to <state dir>/ingress-ca.pem, the file
// clients trust (Node: NODE_EXTRA_CA_CERTS).
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <mutex>
#include <string>

#include "base/result.h"
#include "http/server.h"
#include "http/tls.h"

namespace vessel::gateway::credentials {
class CertificateAuthority;
}

namespace vessel::ingress {

class TlsFront {
 public:
  // `domain`: the sandbox domain; certificates are minted for it and for
  // names under it only (others get the domain's).
  static Result<std::unique_ptr<TlsFront>> create(const std::string& state_dir, std::string domain);
  ~TlsFront();

  // TLS beside plain HTTP on `server`'s port (first-byte detection), its
  // handshakes on `threads`.
  Status install(http::HttpServer& server, http::TlsThreads& threads,
                 http::TlsOptions o = http::TlsOptions{});
  // Sandbox names (and the domain) to their leaf; any other name to
  // `other` when given, else to the domain's leaf. Thread-safe.
  http::CertificateChooser chooser(http::CertificateChooser other = nullptr);
  // Where the CA certificate is (for clients to trust).
  const std::string& caPath() const { return ca_path_; }
  // The leaf presented for a server name (tests).
  std::string certificateName(const std::string& server_name) const;

 private:
  explicit TlsFront(std::string domain);
  // The leaf for `name` (certificateName's), minted on first use and cached
  // by the CA (at most 1024 names, renewed before expiry).
  std::shared_ptr<boost::asio::ssl::context> leaf(const std::string& name);
  bool isSandboxName(const std::string& server_name) const;

  std::string domain_;  // host name only
  std::string ca_path_;
  std::mutex mu_;  // the CA's leaf cache, asked from every TLS thread
  std::unique_ptr<gateway::credentials::CertificateAuthority> ca_;  // guarded by mu_
  std::unique_ptr<http::TlsTerminator> terminator_;
};

}  // namespace vessel::ingress
