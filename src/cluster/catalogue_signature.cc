#include "cluster/catalogue_signature.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <cctype>
#include <fstream>

#include "base/hex.h"
#include "cluster/template_catalogue.h"
#include "templates/manifest.h"

namespace vessel::cluster {

namespace {

constexpr size_t kKeyBytes = 32;
constexpr size_t kSignatureBytes = 64;

std::shared_ptr<EVP_PKEY> owned(EVP_PKEY* k) { return std::shared_ptr<EVP_PKEY>(k, EVP_PKEY_free); }

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The first line of a small key file (a key is one line of hex).
Result<std::string> readKeyText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error(Code::kInvalidArgument, path + ": cannot read it");
  std::string line;
  std::getline(in, line);
  if (line.size() > 256) return Error(Code::kInvalidArgument, path + ": not a key (too long)");
  return std::string(trimmed(line));
}

void appendField(std::string& out, std::string_view f) {
  // Length-prefixed: no two rows' fields run into the same bytes.
  out.append(std::to_string(f.size()));
  out.push_back(':');
  out.append(f);
  out.push_back(';');
}

}  // namespace

std::string signedBytes(const store::TemplateRecord& r) {
  std::string out = "vessel-catalogue-entry-v1;";
  for (std::string_view f : {std::string_view(r.name), std::string_view(r.version),
                             std::string_view(r.tenant_id), std::string_view(r.manifest_json),
                             std::string_view(r.sizes_json), std::string_view(r.created_at)})
    appendField(out, f);
  return out;
}

std::string templateSignatureKey(std::string_view name, std::string_view version) {
  return "template_signature:" + std::string(name) + "@" + std::string(version);
}

Result<CatalogueSigner> CatalogueSigner::fromSeed(std::string_view seed) {
  if (seed.size() != kKeyBytes)
    return Error(Code::kInvalidArgument, "a catalogue key is 32 bytes (64 hex digits)");
  auto k = owned(EVP_PKEY_new_raw_private_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(seed.data()), seed.size()));
  if (!k) return Error(Code::kInternal, "Ed25519 private key: OpenSSL refused it");
  CatalogueSigner s;
  s.key_ = std::move(k);
  return s;
}

Result<CatalogueSigner> CatalogueSigner::openFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error::fromErrno("--catalogue-key-file " + path);
  // The key that makes catalogue entries trusted by every node.
  if (st.st_mode & 077)
    return Error(Code::kInvalidArgument,
                 "--catalogue-key-file " + path + ": readable by others (chmod 0600 it)");
  VESSEL_ASSIGN_OR_RETURN(std::string text, readKeyText(path));
  auto seed = hexDecode(text);
  if (!seed) return Error(Code::kInvalidArgument, "--catalogue-key-file " + path + ": not hex");
  auto s = fromSeed(*seed);
  if (!s.ok()) return std::move(s).error().withContext("--catalogue-key-file " + path);
  return s;
}

std::string CatalogueSigner::publicKeyHex() const {
  unsigned char pub[kKeyBytes];
  size_t n = sizeof(pub);
  if (EVP_PKEY_get_raw_public_key(key_.get(), pub, &n) != 1) return "";
  return hexEncode(std::string_view(reinterpret_cast<const char*>(pub), n));
}

Result<std::string> CatalogueSigner::sign(const store::TemplateRecord& r) const {
  const std::string msg = signedBytes(r);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned char sig[kSignatureBytes];
  size_t n = sizeof(sig);
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &n, reinterpret_cast<const unsigned char*>(msg.data()),
                     msg.size()) != 1)
    return Error(Code::kInternal, "sign catalogue entry " + r.name + "@" + r.version);
  return hexEncode(std::string_view(reinterpret_cast<const char*>(sig), n));
}

Result<CatalogueVerifier> CatalogueVerifier::fromHex(std::string_view hex) {
  auto pub = hexDecode(trimmed(hex));
  if (!pub || pub->size() != kKeyBytes)
    return Error(Code::kInvalidArgument,
                 "a catalogue public key is 64 hex digits (vessel catalogue key prints it)");
  auto k = owned(EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(pub->data()), pub->size()));
  if (!k) return Error(Code::kInvalidArgument, "Ed25519 public key: OpenSSL refused it");
  CatalogueVerifier v;
  v.key_ = std::move(k);
  return v;
}

Result<CatalogueVerifier> CatalogueVerifier::openFile(const std::string& path) {
  VESSEL_ASSIGN_OR_RETURN(std::string text, readKeyText(path));
  auto v = fromHex(text);
  if (!v.ok()) return std::move(v).error().withContext("--catalogue-public-key-file " + path);
  return v;
}

bool CatalogueVerifier::verify(const store::TemplateRecord& r,
                               std::string_view signature_hex) const {
  auto sig = hexDecode(signature_hex);
  if (!key_ || !sig || sig->size() != kSignatureBytes) return false;
  const std::string msg = signedBytes(r);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig->data()),
                          sig->size(), reinterpret_cast<const unsigned char*>(msg.data()),
                          msg.size()) == 1;
}

Status signAnswered(store::Store& store, const CatalogueSigner& signer, const std::string& tenant,
                    const std::string& name, const std::string& version,
                    const std::string& answered_manifest_json) {
  const std::string id = name + "@" + version;
  VESSEL_ASSIGN_OR_RETURN(auto row, store.getTemplate(name, version));
  if (!row)
    return Error(Code::kFailedPrecondition,
                 "sign catalogue entry " + id + ": the node did not register it");
  auto answered = templates::parseManifest(answered_manifest_json);
  if (!answered.ok()) return std::move(answered).error().withContext("sign catalogue entry " + id);
  auto stored = entryFromRecord(*row);
  if (!stored.ok()) return std::move(stored).error().withContext("sign catalogue entry " + id);
  // What the store holds must be what the node answered, for this tenant: a
  // row another node rewrote meanwhile is not signed.
  if (row->tenant_id != tenant ||
      templates::toJson(stored->manifest) != templates::toJson(*answered))
    return Error(Code::kFailedPrecondition,
                 "sign catalogue entry " + id +
                     ": the stored entry is not what the node answered; not signed");
  VESSEL_ASSIGN_OR_RETURN(std::string sig, signer.sign(*row));
  return store.setMeta(templateSignatureKey(name, version), sig);
}

Result<templates::CatalogueEntry> verifiedEntry(store::Store& store,
                                                const CatalogueVerifier& verifier,
                                                const std::string& name,
                                                const std::string& version) {
  const std::string id = name + "@" + version;
  VESSEL_ASSIGN_OR_RETURN(auto row, store.getTemplate(name, version));
  if (!row) return Error(Code::kNotFound, "catalogue entry " + id + " is gone");
  VESSEL_ASSIGN_OR_RETURN(auto sig, store.getMeta(templateSignatureKey(name, version)));
  if (!sig || !verifier.verify(*row, *sig))
    return Error(Code::kFailedPrecondition,
                 "catalogue entry " + id +
                     " is not signed by the API replicas (or was changed since): not copied");
  // The entry is parsed from the very row that verified.
  return entryFromRecord(*row);
}

}  // namespace vessel::cluster
