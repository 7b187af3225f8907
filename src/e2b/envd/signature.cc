#include "e2b/envd/signature.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <charconv>

namespace vessel::e2b::envd {

std::string fileSignature(std::string_view path, std::string_view operation, std::string_view user,
                          std::string_view token, std::optional<int64_t> expiration) {
  std::string raw;
  raw.append(path).append(":").append(operation).append(":").append(user).append(":").append(token);
  if (expiration) raw.append(":").append(std::to_string(*expiration));
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(raw.data()), raw.size(), md);
  unsigned char b64[4 * ((SHA256_DIGEST_LENGTH + 2) / 3) + 1];
  int n = EVP_EncodeBlock(b64, md, SHA256_DIGEST_LENGTH);
  std::string out = "v1_";
  out.append(reinterpret_cast<const char*>(b64), static_cast<size_t>(n));
  while (!out.empty() && out.back() == '=') out.pop_back();
  return out;
}

Result<int64_t> parseExpiration(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || s.size() > 19 || ec != std::errc() || p != s.data() + s.size() || v < 0)
    return Error(Code::kInvalidArgument, "signature_expiration is not a unix time in seconds");
  return v;
}

Status checkFileSignature(const SignedRequest& r, std::string_view token, int64_t now_unix) {
  if (r.operation != "read" && r.operation != "write")
    return Error(Code::kInvalidArgument, "signed URL: unknown operation " + r.operation);
  std::string want = fileSignature(r.path, r.operation, r.user, token, r.expiration);
  if (want.size() != r.signature.size() ||
      CRYPTO_memcmp(want.data(), r.signature.data(), want.size()) != 0)
    return Error(Code::kUnauthenticated, "invalid signature");
  if (r.expiration && *r.expiration < now_unix)
    return Error(Code::kUnauthenticated, "signature is already expired");
  return okStatus();
}

}  // namespace vessel::e2b::envd
