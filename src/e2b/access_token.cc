#include "e2b/access_token.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>

#include "base/aead.h"
#include "store/store.h"

namespace vessel::e2b {
namespace {

std::string hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[p[i] >> 4]);
    out.push_back(kDigits[p[i] & 15]);
  }
  return out;
}

std::string hmacHex(std::string_view key, std::string_view label, std::string_view id) {
  std::string msg(label);
  msg.append(id);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), md, &n);
  return hex(md, n);
}

bool sameInConstantTime(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

Result<AccessTokens> AccessTokens::open(const std::string& state_dir) {
  return openFile(state_dir + "/e2b-token-key");
}

Result<AccessTokens> AccessTokens::openFile(const std::string& path) {
  VESSEL_ASSIGN_OR_RETURN(std::string key, aeadKeyFile(path));
  return AccessTokens(std::move(key));
}

Status AccessTokens::forgetStoredKey(store::Store& store) {
  VESSEL_ASSIGN_OR_RETURN(auto stored, store.getMeta("e2b_token_key"));
  if (!stored || stored->empty()) return okStatus();
  return store.setMeta("e2b_token_key", "");
}

AccessTokens AccessTokens::nodeSide(std::string forward_secret) {
  AccessTokens t{std::string()};
  t.forward_secret_ = std::move(forward_secret);
  return t;
}

AccessTokens AccessTokens::withKey(std::string key) { return AccessTokens(std::move(key)); }

std::string AccessTokens::forSandbox(std::string_view sandbox_id) const {
  return mac("envd-access-token:", sandbox_id);
}

std::string AccessTokens::trafficForSandbox(std::string_view sandbox_id) const {
  return mac("traffic-access-token:", sandbox_id);
}

namespace {

constexpr std::string_view kVolumePrefix = "vvt_";
constexpr size_t kMaxTenantBytes = 128;

}  // namespace

std::string AccessTokens::forVolume(std::string_view tenant, std::string_view volume_id) const {
  std::string t = hex(reinterpret_cast<const unsigned char*>(tenant.data()), tenant.size());
  std::string subject = t + "/" + std::string(volume_id);
  return std::string(kVolumePrefix) + t + "_" + mac("volume-token:", subject);
}

std::optional<std::string> AccessTokens::checkVolume(std::string_view volume_id,
                                                     std::string_view token) const {
  if (!hasKey() || volume_id.empty() || !token.starts_with(kVolumePrefix)) return std::nullopt;
  token.remove_prefix(kVolumePrefix.size());
  auto sep = token.find('_');
  if (sep == std::string_view::npos || sep == 0 || sep % 2 != 0 || sep > 2 * kMaxTenantBytes)
    return std::nullopt;
  std::string tenant;
  for (size_t i = 0; i < sep; i += 2) {
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = nibble(token[i]), lo = nibble(token[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    tenant.push_back(static_cast<char>(hi * 16 + lo));
  }
  // Compared whole (prefix and tenant included), in constant time.
  std::string given = std::string(kVolumePrefix) + std::string(token);
  if (!sameInConstantTime(forVolume(tenant, volume_id), given)) return std::nullopt;
  return tenant;
}

std::string AccessTokens::mac(std::string_view label, std::string_view sandbox_id) const {
  return hmacHex(key_, label, sandbox_id);
}

bool AccessTokens::check(std::string_view sandbox_id, std::string_view token) const {
  // Without the key every "token" would be HMAC under an empty key, which
  // anyone can compute.
  if (!hasKey()) return false;
  return sameInConstantTime(forSandbox(sandbox_id), token);
}

std::string AccessTokens::forwardProof(std::string_view sandbox_id) const {
  return proofUnder(forward_secret_, sandbox_id);
}

std::string AccessTokens::proofUnder(std::string_view secret, std::string_view sandbox_id) {
  if (secret.empty()) return "";
  return hmacHex(secret, "envd-forward:", sandbox_id);
}

bool AccessTokens::forwarded(std::string_view sandbox_id, std::string_view proof) const {
  if (forward_secret_.empty() || sandbox_id.empty()) return false;
  return sameInConstantTime(forwardProof(sandbox_id), proof);
}

}  // namespace vessel::e2b
