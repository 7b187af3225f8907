#pragma once
// HTTPS for sandbox ports on the same listener as plain HTTP (E2B's SDKs
// and tests fetch `https://${sandbox.getHost(port)}`). A connection whose
// first byte starts a TLS handshake is handed here (http::HttpServer::onTls):
// the handshake presents a certificate for the name the client asked for
// (SNI), minted by Vessel's ingress CA, and the decrypted bytes go to the
// listener's own plain HTTP side over loopback, so routing (proxy.h, envd)
// exists once.
//
// The CA is made on the first start in <state dir>/ingress-ca/ (key 0600)
// and its certificate copied to <state dir>/ingress-ca.pem, the file
// clients trust (Node: NODE_EXTRA_CA_CERTS).
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <string>

#include "base/result.h"
#include "http/server.h"

namespace vessel::gateway::credentials {
class CertificateAuthority;
}

namespace vessel::ingress {

class TlsFront {
 public:
  // `domain`: the sandbox domain; certificates are minted for it and for
  // names under it only (others get the domain's).
  static Result<std::unique_ptr<TlsFront>> create(boost::asio::io_context& io,
                                                  const std::string& state_dir, std::string domain);
  ~TlsFront();

  // TLS on `server`'s port, relayed to its plain HTTP.
  void install(http::HttpServer& server);
  // Where the CA certificate is (for clients to trust).
  const std::string& caPath() const { return ca_path_; }
  // The leaf presented for a server name (tests).
  std::string certificateName(const std::string& server_name) const;

 private:
  TlsFront(boost::asio::io_context& io, std::string domain);
  void serve(boost::asio::ip::tcp::socket sock, boost::asio::ip::tcp::endpoint plain);

  boost::asio::io_context& io_;
  std::string domain_;  // host name only
  std::string ca_path_;
  std::unique_ptr<gateway::credentials::CertificateAuthority> ca_;
  struct Contexts;
  std::unique_ptr<Contexts> ctx_;
};

}  // namespace vessel::ingress
