#pragma once
// TLS on vesseld's listeners (docs/operations.md, "TLS"): the certificate
// each listener presents, from --tls-cert/--tls-key (re-read on SIGHUP:
// new connections get the new pair, open ones keep theirs, a bad new pair
// keeps the old one and says why), from a listener's own --tls-pair
// (re-read the same way), or from --tls-self-signed (vesseld's own CA in
// <state_dir>/tls-ca/, name-constrained to the --tls-name names, reused
// on every start while the names stay the same, its certificate written
// to --tls-ca-out for clients). Owns the TLS threads every listener's
// handshakes run on (http/tls.h), also when the listeners are plain: the
// envd listener's sandbox ports speak TLS in any case (ingress/tls.h).
#include <boost/asio/ssl/context.hpp>
#include <map>
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

  // Whether `listener` (Config::kTlsListeners) speaks TLS: the default
  // pair, the self-signed CA or a pair of its own.
  bool enabled(const std::string& listener) const { return enabled_ || pairs_.count(listener) > 0; }
  // "https" or "http", for URLs and logs.
  const char* scheme(const std::string& listener) const {
    return enabled(listener) ? "https" : "http";
  }
  http::TlsThreads& threads() { return threads_; }
  // TLS only on `server` (before it listens), when `listener` speaks TLS;
  // `wrap` turns this listener's chooser into the one served (the envd
  // listener: its sandbox names first). Nothing otherwise.
  Status serve(http::HttpServer& server, const std::string& listener,
               std::function<http::CertificateChooser(http::CertificateChooser)> wrap = nullptr);
  // The certificate every handshake on `listener` without a more specific
  // one gets. Thread-safe.
  http::CertificateChooser chooser(const std::string& listener);
  // SIGHUP: re-reads --tls-cert/--tls-key and every --tls-pair. A pair
  // that fails keeps the one served (the others are still renewed); the
  // first failure is returned.
  Status reload();
  // --tls-self-signed: where the CA certificate is ("" otherwise).
  const std::string& caPath() const { return ca_path_; }

 private:
  ListenerTls() = default;
  std::shared_ptr<boost::asio::ssl::context> current(const std::string& listener);

  // One certificate and key from files, and the context serving them.
  struct Pair {
    std::string cert_file, key_file;
    std::shared_ptr<boost::asio::ssl::context> ctx;  // guarded by mu_
  };
  bool enabled_ = false;
  std::string cert_file_, key_file_;
  std::map<std::string, Pair> pairs_;  // by listener; the map itself fixed after create()
  std::vector<std::string> names_;     // self-signed
  std::string ca_path_;
  std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> pair_;                 // guarded by mu_
  std::unique_ptr<gateway::credentials::CertificateAuthority> ca_;  // guarded by mu_
  http::TlsThreads threads_{2};
  std::vector<std::unique_ptr<http::TlsTerminator>> terminators_;
};

}  // namespace vessel::vesseld
