#include "gateway/credentials/ca.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <boost/asio/ip/address.hpp>
#include <set>

#include "base/fd.h"

namespace vessel::gateway::credentials {

namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

PkeyPtr newKey() { return PkeyPtr(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")); }

std::string toPem(X509* cert) {
  BioPtr b(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(b.get(), cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(b.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string keyToPem(EVP_PKEY* key) {
  BioPtr b(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(b.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(b.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

bool addExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

void randomSerial(X509* cert) {
  unsigned char bytes[16];
  RAND_bytes(bytes, sizeof bytes);
  bytes[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(bytes, sizeof bytes, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert));
  BN_free(bn);
}

int selectHttp11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                 unsigned int inlen, void*) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* sel = nullptr;
  if (SSL_select_next_proto(&sel, outlen, kHttp11, sizeof kHttp11, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;  // h2-only clients get no ALPN, i.e. HTTP/1.1
  }
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

// Whether `cert` carries exactly the critical nameConstraints extension
// that `value` (nameConstraints()) makes, compared as DER.
bool constrainedTo(X509* cert, const std::string& value) {
  int at = X509_get_ext_by_NID(cert, NID_name_constraints, -1);
  if (at < 0) return false;
  X509_EXTENSION* have = X509_get_ext(cert, at);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, nullptr, nullptr, nullptr, nullptr, 0);
  X509_EXTENSION* want = X509V3_EXT_conf_nid(nullptr, &ctx, NID_name_constraints, value.c_str());
  if (!want) return false;
  bool same =
      X509_EXTENSION_get_critical(have) == X509_EXTENSION_get_critical(want) &&
      ASN1_OCTET_STRING_cmp(X509_EXTENSION_get_data(have), X509_EXTENSION_get_data(want)) == 0;
  X509_EXTENSION_free(want);
  return same;
}

}  // namespace

std::string opensslError(const std::string& why) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown error";
  if (e) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return why + ": " + buf;
}

Result<std::string> CertificateAuthority::nameConstraints(
    const std::vector<std::string>& permitted) {
  // Sorted and without repeats: the same names in another order are the
  // same constraint (and the same CA).
  std::set<std::string> dns, ips;
  for (const auto& n : permitted) {
    boost::system::error_code ec;
    auto ip = boost::asio::ip::make_address(n, ec);
    if (!ec) {
      ips.insert(ip.is_v4() ? ip.to_string() + "/255.255.255.255"
                            : ip.to_string() + "/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
      continue;
    }
    std::string d = n.rfind("*.", 0) == 0 ? n.substr(2) : n;
    bool ok = !d.empty() && d.size() <= 253 && d.front() != '.' && d.back() != '.';
    for (char ch : d)
      ok = ok && ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.');
    if (!ok) return Error(Code::kInvalidArgument, "CA name constraint '" + n + "'");
    dns.insert(d);
  }
  // RFC 6761's reserved name: no DNS name given, none permitted.
  if (dns.empty()) dns.insert("invalid");
  std::string v = "critical";
  for (const auto& d : dns) v += ",permitted;DNS:" + d;
  for (const auto& ip : ips) v += ",permitted;IP:" + ip;
  // A permitted address of either family constrains both (OpenSSL and RFC
  // 5280 match IP names against every IP subtree); none: exclude all.
  if (ips.empty()) v += ",excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:0:0:0:0:0:0:0:0/0:0:0:0:0:0:0:0";
  return v;
}

Result<CertificateAuthority> CertificateAuthority::loadOrCreate(
    const std::string& dir, const std::string& common_name,
    const std::vector<std::string>& permitted) {
  CertificateAuthority ca;
  std::string key_path = dir + "/ca.key", cert_path = dir + "/ca.crt";
  auto key_pem = readFile(key_path);
  auto cert_pem = readFile(cert_path);
  std::string constraints;
  if (!permitted.empty()) {
    VESSEL_ASSIGN_OR_RETURN(constraints, nameConstraints(permitted));
  }
  bool have = key_pem.ok() && cert_pem.ok(), replace = false;
  if (have && !constraints.empty()) {
    // A CA made before the constraint (or for other names) would make
    // clients trust it for every name, or for names no longer ours:
    // replace it.
    BioPtr cb(BIO_new_mem_buf(cert_pem->data(), static_cast<int>(cert_pem->size())));
    X509Ptr old(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
    replace = old && !constrainedTo(old.get(), constraints);
    have = !replace;
  }
  if (have) {
    BioPtr kb(BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size())));
    BioPtr cb(BIO_new_mem_buf(cert_pem->data(), static_cast<int>(cert_pem->size())));
    ca.key_.reset(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
    ca.cert_.reset(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
    if (!ca.key_ || !ca.cert_) return Error(Code::kInternal, opensslError("load CA in " + dir));
    struct stat st;
    if (::stat(key_path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      return Error(Code::kPermissionDenied, key_path + " is readable by others; want mode 0600");
    }
  } else if (!replace && key_pem.ok() != cert_pem.ok()) {
    return Error(Code::kFailedPrecondition, "CA in " + dir + " has only one of ca.key, ca.crt");
  } else {
    ca.key_ = newKey();
    ca.cert_.reset(X509_new());
    X509* c = ca.cert_.get();
    X509_set_version(c, 2);
    randomSerial(c);
    X509_gmtime_adj(X509_getm_notBefore(c), -3600);
    X509_gmtime_adj(X509_getm_notAfter(c), 10L * 365 * 24 * 3600);
    X509_NAME* n = X509_get_subject_name(c);
    X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("Vessel"), -1, -1, 0);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                               0);
    X509_set_issuer_name(c, n);
    X509_set_pubkey(c, ca.key_.get());
    if (!addExt(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
        !addExt(c, c, NID_key_usage, "critical,keyCertSign,cRLSign") ||
        !addExt(c, c, NID_subject_key_identifier, "hash") ||
        (!constraints.empty() && !addExt(c, c, NID_name_constraints, constraints.c_str())) ||
        X509_sign(c, ca.key_.get(), EVP_sha256()) == 0) {
      return Error(Code::kInternal, opensslError("create CA"));
    }
    ::mkdir(dir.c_str(), 0700);
    VESSEL_TRY_CTX(writeFileAtomic(key_path, keyToPem(ca.key_.get()), 0600), "write CA key");
    VESSEL_TRY_CTX(writeFileAtomic(cert_path, toPem(c), 0644), "write CA certificate");
  }
  ca.cert_pem_ = toPem(ca.cert_.get());
  ca.leaf_key_ = newKey();
  if (!ca.leaf_key_) return Error(Code::kInternal, opensslError("leaf key"));
  return ca;
}

Result<X509Ptr> CertificateAuthority::mintLeaf(const std::string& name, EVP_PKEY* leaf_key) {
  return mintLeaf(std::vector<std::string>{name}, leaf_key);
}

Result<X509Ptr> CertificateAuthority::mintLeaf(const std::vector<std::string>& names,
                                               EVP_PKEY* leaf_key) {
  if (names.empty()) return Error(Code::kInvalidArgument, "mint leaf: no name");
  const std::string& name = names.front();
  X509Ptr leaf(X509_new());
  X509* c = leaf.get();
  X509_set_version(c, 2);
  randomSerial(c);
  X509_gmtime_adj(X509_getm_notBefore(c), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c),
                  std::chrono::duration_cast<std::chrono::seconds>(kLeafLifetime).count());
  // The subject's CN is the first DNS name. An IP literal never goes there:
  // OpenSSL checks a host-like CN against a CA's DNS name constraints, so
  // a leaf for 127.0.0.1 under a CA that permits only its IP would fail.
  std::string cn;
  for (const auto& each : names) {
    boost::system::error_code ec;
    (void)boost::asio::ip::make_address(each, ec);
    if (ec) {
      cn = each;
      break;
    }
  }
  X509_NAME* n = X509_get_subject_name(c);
  if (cn.empty()) {
    X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("Vessel"), -1, -1, 0);
  } else {
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  }
  X509_set_issuer_name(c, X509_get_subject_name(cert_.get()));
  X509_set_pubkey(c, leaf_key);
  // Names are normalized by the callers: no ',' can reach here.
  std::string san;
  for (const auto& each : names) {
    boost::system::error_code ec;
    (void)boost::asio::ip::make_address(each, ec);
    san += (san.empty() ? "" : ",") + std::string(ec ? "DNS:" : "IP:") + each;
  }
  if (!addExt(c, cert_.get(), NID_subject_alt_name, san.c_str()) ||
      !addExt(c, cert_.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !addExt(c, cert_.get(), NID_ext_key_usage, "serverAuth") ||
      !addExt(c, cert_.get(), NID_authority_key_identifier, "keyid") ||
      X509_sign(c, key_.get(), EVP_sha256()) == 0) {
    return Error(Code::kInternal, opensslError("mint leaf for " + name));
  }
  return leaf;
}

Result<std::shared_ptr<boost::asio::ssl::context>> CertificateAuthority::serverContext(
    const std::string& name) {
  return serverContext(std::vector<std::string>{name});
}

Result<std::shared_ptr<boost::asio::ssl::context>> CertificateAuthority::serverContext(
    const std::vector<std::string>& names) {
  if (names.empty()) return Error(Code::kInvalidArgument, "server context: no name");
  std::string name = names.front();
  for (size_t i = 1; i < names.size(); ++i) name += "," + names[i];
  auto now = now_();
  if (auto it = contexts_.find(name);
      it != contexts_.end() && now - it->second.at < kLeafRenewAfter)
    return it->second.ctx;
  VESSEL_ASSIGN_OR_RETURN(X509Ptr leaf, mintLeaf(names, leaf_key_.get()));
  auto ctx = std::make_shared<boost::asio::ssl::context>(boost::asio::ssl::context::tls_server);
  SSL_CTX* s = ctx->native_handle();
  SSL_CTX_set_min_proto_version(s, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate(s, leaf.get()) != 1 || SSL_CTX_add1_chain_cert(s, cert_.get()) != 1 ||
      SSL_CTX_use_PrivateKey(s, leaf_key_.get()) != 1) {
    return Error(Code::kInternal, opensslError("server context for " + name));
  }
  SSL_CTX_set_alpn_select_cb(s, selectHttp11, nullptr);
  if (contexts_.size() > 1024) contexts_.clear();
  contexts_[name] = {ctx, now};
  return ctx;
}

}  // namespace vessel::gateway::credentials
