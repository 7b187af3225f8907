#include "ingress/tls.h"

#include "base/fd.h"
#include "base/log.h"
#include "gateway/credentials/ca.h"
#include "ingress/host.h"

namespace vessel::ingress {

namespace ssl = boost::asio::ssl;

TlsFront::TlsFront(std::string domain) : domain_(hostName(domain)) {}

TlsFront::~TlsFront() = default;

Result<std::unique_ptr<TlsFront>> TlsFront::create(const std::string& state_dir,
                                                   std::string domain) {
  std::unique_ptr<TlsFront> t(new TlsFront(std::move(domain)));
  for (char c : t->domain_)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
      return Error(Code::kInvalidArgument, "sandbox domain '" + t->domain_ + "' is not a DNS name");
  if (t->domain_.empty()) return Error(Code::kInvalidArgument, "empty sandbox domain");
  VESSEL_ASSIGN_OR_RETURN(auto ca, gateway::credentials::CertificateAuthority::loadOrCreate(
                                       state_dir + "/ingress-ca", "Vessel sandbox ingress CA",
                                       std::vector<std::string>{t->domain_}));
  t->ca_ = std::make_unique<gateway::credentials::CertificateAuthority>(std::move(ca));
  t->ca_path_ = state_dir + "/ingress-ca.pem";
  // The file clients point at: rewritten from the CA on every start.
  VESSEL_TRY_CTX(writeFileAtomic(t->ca_path_, t->ca_->certificatePem(), 0644),
                 "write " + t->ca_path_);
  // The domain's own leaf now: a CA that cannot mint fails the start.
  auto first = t->ca_->serverContext(t->domain_);
  if (!first.ok()) return std::move(first).error();
  return t;
}

std::string TlsFront::certificateName(const std::string& server_name) const {
  std::string name = hostName(server_name);
  if (name == domain_ || parseSandboxHost(name, domain_)) return name;
  return domain_;
}

bool TlsFront::isSandboxName(const std::string& server_name) const {
  std::string name = hostName(server_name);
  return name == domain_ || parseSandboxHost(name, domain_).has_value();
}

std::shared_ptr<ssl::context> TlsFront::leaf(const std::string& name) {
  std::lock_guard lock(mu_);
  auto ctx = ca_->serverContext(name);
  if (!ctx.ok()) {
    Logger("ingress").warn("https: {}", ctx.error().message());
    return nullptr;
  }
  return *ctx;
}

http::CertificateChooser TlsFront::chooser(http::CertificateChooser other) {
  return [this, other = std::move(other)](const std::string& sni) {
    if (other && !isSandboxName(sni)) return other(sni);
    return leaf(certificateName(sni));
  };
}

Status TlsFront::install(http::HttpServer& server, http::TlsThreads& threads, http::TlsOptions o) {
  VESSEL_ASSIGN_OR_RETURN(terminator_, http::TlsTerminator::create(threads, chooser(), o));
  terminator_->install(server, http::TlsMode::kDetect);
  return okStatus();
}

}  // namespace vessel::ingress
