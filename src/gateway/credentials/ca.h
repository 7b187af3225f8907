#pragma once
// The per-deployment certificate authority used for credential injection.
// Generated on the gateway's first start (key file mode 0600, so readable
// only by root who runs the gateway); its certificate goes into sandbox trust
// stores. Leaves are minted per host name on first use and cached: the
// gateway only ever mints for names a policy has bound a credential to.
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"

namespace vessel::gateway::credentials {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;

class CertificateAuthority {
 public:
  // Loads dir/ca.key and dir/ca.crt, creating both if neither exists (a
  // new CA gets `common_name`). `permitted` non-empty: the CA is
  // name-constrained (critical X.509 nameConstraints) to those names, so a
  // client told to trust it trusts it for them only: each DNS name permits
  // its subtree (a leading "*." is dropped), each IP literal that one
  // address; no IP literal excludes every address, no DNS name permits
  // only the reserved `invalid` (the ingress CA: the sandbox domain; the
  // listener CA: its --tls-name names). A CA found without exactly that
  // constraint (older, or other names) is replaced.
  static Result<CertificateAuthority> loadOrCreate(
      const std::string& dir, const std::string& common_name = "Vessel egress CA",
      const std::vector<std::string>& permitted = {});

  // The nameConstraints value (OpenSSL's configuration syntax) loadOrCreate
  // gives a CA for `permitted`, or kInvalidArgument for a name that is
  // neither a DNS name nor an IP literal.
  static Result<std::string> nameConstraints(const std::vector<std::string>& permitted);

  const std::string& certificatePem() const { return cert_pem_; }

  // A TLS server context presenting a leaf for `name`, offering only
  // http/1.1 by ALPN (so every request stays visible to the gateway).
  Result<std::shared_ptr<boost::asio::ssl::context>> serverContext(const std::string& name);

  // One leaf for every name in `names` (DNS names and IP literals, as
  // subjectAltNames), cached and renewed like serverContext's: a listener
  // reached by several names (vesseld --tls-self-signed).
  Result<std::shared_ptr<boost::asio::ssl::context>> serverContext(
      const std::vector<std::string>& names);

  // Mints a leaf certificate for `name` signed by this CA (exposed for tests).
  Result<X509Ptr> mintLeaf(const std::string& name, EVP_PKEY* leaf_key);
  Result<X509Ptr> mintLeaf(const std::vector<std::string>& names, EVP_PKEY* leaf_key);

  // Leaves are valid for kLeafLifetime and re-minted once kLeafRenewAfter
  // has passed, so a cached one never reaches its expiry in use.
  static constexpr std::chrono::hours kLeafLifetime{7 * 24};
  static constexpr std::chrono::hours kLeafRenewAfter{5 * 24};
  using Clock = std::function<std::chrono::system_clock::time_point()>;
  void setClockForTest(Clock c) { now_ = std::move(c); }

 private:
  PkeyPtr key_;
  X509Ptr cert_;
  std::string cert_pem_;
  PkeyPtr leaf_key_;  // one key for all leaves; certificates differ per name
  struct Minted {
    std::shared_ptr<boost::asio::ssl::context> ctx;
    std::chrono::system_clock::time_point at;
  };
  std::map<std::string, Minted> contexts_;
  Clock now_ = [] { return std::chrono::system_clock::now(); };
};

// "<why>: <first OpenSSL error>", and clears the OpenSSL error queue.
std::string opensslError(const std::string& why);

}  // namespace vessel::gateway::credentials
