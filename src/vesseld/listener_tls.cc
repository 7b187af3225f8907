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
    // Name-constrained to the names given (clients told to trust it trust
    // it for those only); other names make a new CA. Its key stays in the
    // state directory (0600), never copied.
    VESSEL_ASSIGN_OR_RETURN(auto ca,
                            gateway::credentials::CertificateAuthority::loadOrCreate(
                                cfg.state_dir + "/tls-ca", "Vessel listener CA", t->names_));
    t->ca_ = std::make_unique<gateway::credentials::CertificateAuthority>(std::move(ca));
    t->ca_path_ = cfg.tls_ca_out;
    VESSEL_TRY_CTX(writeFileAtomic(t->ca_path_, t->ca_->certificatePem(), 0644),
                   "write the TLS CA certificate " + t->ca_path_);
    auto leaf = t->ca_->serverContext(t->names_);
    if (!leaf.ok()) return std::move(leaf).error();
  }
  for (const auto& [listener, files] : cfg.tls_pair_of) {
    Pair& p = t->pairs_[listener];
    p.cert_file = files.cert;
    p.key_file = files.key;
    VESSEL_ASSIGN_OR_RETURN(p.ctx, http::serverContextFromFiles(files.cert, files.key));
  }
  return t;
}

std::shared_ptr<ssl::context> ListenerTls::current(const std::string& listener) {
  std::lock_guard lock(mu_);
  if (auto it = pairs_.find(listener); it != pairs_.end()) return it->second.ctx;
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

http::CertificateChooser ListenerTls::chooser(const std::string& listener) {
  return [this, listener](const std::string&) { return current(listener); };
}

Status ListenerTls::serve(http::HttpServer& server, const std::string& listener,
                          std::function<http::CertificateChooser(http::CertificateChooser)> wrap) {
  if (!enabled(listener)) return okStatus();
  http::CertificateChooser choose = wrap ? wrap(chooser(listener)) : chooser(listener);
  VESSEL_ASSIGN_OR_RETURN(auto t, http::TlsTerminator::create(threads_, std::move(choose)));
  t->install(server, http::TlsMode::kOnly);
  terminators_.push_back(std::move(t));
  return okStatus();
}

Status ListenerTls::reload() {
  Logger log("vesseld");
  Status first = okStatus();
  // Each file pair on its own: a broken one keeps what it served.
  auto renew = [&](const std::string& what, const std::string& cert, const std::string& key,
                   std::shared_ptr<ssl::context>& served) {
    auto fresh = http::serverContextFromFiles(cert, key);
    if (!fresh.ok()) {
      log.warn("SIGHUP: keeping the TLS certificate {} serves: {}", what, fresh.error().message());
      if (first.ok()) first = std::move(fresh).error().withContext(what);
      return;
    }
    std::lock_guard lock(mu_);
    served = *fresh;
    log.info("SIGHUP: new TLS connections to {} get {} (open ones keep theirs)", what, cert);
  };
  if (!cert_file_.empty()) renew("every listener", cert_file_, key_file_, pair_);
  for (auto& [listener, p] : pairs_)
    renew("the " + listener + " listener", p.cert_file, p.key_file, p.ctx);
  if (cert_file_.empty() && pairs_.empty() && enabled_)
    log.info("SIGHUP: the self-signed certificate has nothing to reload");
  return first;
}

}  // namespace vessel::vesseld
