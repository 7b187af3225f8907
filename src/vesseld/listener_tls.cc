#include "vesseld/listener_tls.h"

#include "base/fd.h"
#include "base/log.h"
#include "gateway/credentials/ca.h"

namespace vessel::vesseld {

namespace ssl = boost::asio::ssl;

ListenerTls::~ListenerTls() = default;

Result<std::unique_ptr<ListenerTls>> ListenerTls::create(const Config& cfg) {
  std::unique_ptr<ListenerTls> t(new ListenerTls());
  if (!cfg.tls_cert.empty()) {
    t->enabled_ = true;
    t->cert_file_ = cfg.tls_cert;
    t->key_file_ = cfg.tls_key;
    VESSEL_ASSIGN_OR_RETURN(t->pair_, http::serverContextFromFiles(cfg.tls_cert, cfg.tls_key));
  } else if (cfg.tls_self_signed) {
    t->enabled_ = true;
    t->names_ = cfg.tls_names;
    // Unconstrained (it signs the names given, which may change): its key
    // stays in the state directory (0600), never copied.
    VESSEL_ASSIGN_OR_RETURN(auto ca, gateway::credentials::CertificateAuthority::loadOrCreate(
                                         cfg.state_dir + "/tls-ca", "Vessel listener CA"));
    t->ca_ = std::make_unique<gateway::credentials::CertificateAuthority>(std::move(ca));
    t->ca_path_ = cfg.tls_ca_out;
    VESSEL_TRY_CTX(writeFileAtomic(t->ca_path_, t->ca_->certificatePem(), 0644),
                   "write the TLS CA certificate " + t->ca_path_);
    auto leaf = t->ca_->serverContext(t->names_);
    if (!leaf.ok()) return std::move(leaf).error();
  }
  return t;
}

std::shared_ptr<ssl::context> ListenerTls::current() {
  std::lock_guard lock(mu_);
  if (pair_) return pair_;
  if (!ca_) return nullptr;
  // Renewed by the CA before the leaf expires.
  auto ctx = ca_->serverContext(names_);
  if (!ctx.ok()) {
    Logger("vesseld").warn("TLS: {}", ctx.error().message());
    return nullptr;
  }
  return *ctx;
}

http::CertificateChooser ListenerTls::chooser() {
  return [this](const std::string&) { return current(); };
}

Status ListenerTls::serve(http::HttpServer& server,
                          std::function<http::CertificateChooser(http::CertificateChooser)> wrap) {
  if (!enabled_) return okStatus();
  http::CertificateChooser choose = wrap ? wrap(chooser()) : chooser();
  VESSEL_ASSIGN_OR_RETURN(auto t, http::TlsTerminator::create(threads_, std::move(choose)));
  t->install(server, http::TlsMode::kOnly);
  terminators_.push_back(std::move(t));
  return okStatus();
}

Status ListenerTls::reload() {
  Logger log("vesseld");
  if (cert_file_.empty()) {
    if (enabled_) log.info("SIGHUP: the self-signed certificate has nothing to reload");
    return okStatus();
  }
  auto fresh = http::serverContextFromFiles(cert_file_, key_file_);
  if (!fresh.ok()) {
    log.warn("SIGHUP: keeping the TLS certificate served: {}", fresh.error().message());
    return std::move(fresh).error();
  }
  {
    std::lock_guard lock(mu_);
    pair_ = *fresh;
  }
  log.info("SIGHUP: new TLS connections get {} (open ones keep theirs)", cert_file_);
  return okStatus();
}

}  // namespace vessel::vesseld
