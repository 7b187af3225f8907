#pragma once
// TLS on vesseld's listeners (docs/operations.md, "TLS"): the certificate
// every listener clients reach presents, from --tls-cert/--tls-key
// (re-read on SIGHUP: new connections get the new pair, open ones keep
// theirs, a bad new pair keeps the old one and says why) or from
// --tls-self-signed (vesseld's own CA in <state_dir>/tls-ca/, reused on
// every start, its certificate written to --tls-ca-out for clients). Owns
// the TLS threads every listener's handshakes run on (http/tls.h), also
// when the listeners are plain: the envd listener's sandbox ports speak
// TLS in any case (ingress/tls.h).
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "http/server.h"
#include "http/tls.h"
#include "vesseld/config.h"

namespace vessel::gateway::credentials {
class CertificateAuthority;
}

namespace vessel::vesseld {

class ListenerTls {
 public:
  // From the validated config: its pair loaded, or its CA made or loaded.
  static Result<std::unique_ptr<ListenerTls>> create(const Config& cfg);
  ~ListenerTls();

  // Whether listeners speak TLS (a pair or the self-signed CA).
  bool enabled() const { return enabled_; }
  // "https" or "http", for URLs and logs.
  const char* scheme() const { return enabled_ ? "https" : "http"; }
  http::TlsThreads& threads() { return threads_; }
  // TLS only on `server` (before it listens), when enabled; `wrap` turns
  // this listener's chooser into the one served (the envd listener: its
  // sandbox names first). Nothing when not enabled.
  Status serve(http::HttpServer& server,
               std::function<http::CertificateChooser(http::CertificateChooser)> wrap = nullptr);
  // The certificate every handshake without a more specific one gets.
  // Thread-safe.
  http::CertificateChooser chooser();
  // SIGHUP: re-reads --tls-cert/--tls-key. An error keeps the pair served.
  Status reload();
  // --tls-self-signed: where the CA certificate is ("" otherwise).
  const std::string& caPath() const { return ca_path_; }

 private:
  ListenerTls() = default;
  std::shared_ptr<boost::asio::ssl::context> current();

  bool enabled_ = false;
  std::string cert_file_, key_file_;
  std::vector<std::string> names_;  // self-signed
  std::string ca_path_;
  std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> pair_;                 // guarded by mu_
  std::unique_ptr<gateway::credentials::CertificateAuthority> ca_;  // guarded by mu_
  http::TlsThreads threads_{2};
  std::vector<std::unique_ptr<http::TlsTerminator>> terminators_;
};

}  // namespace vessel::vesseld
