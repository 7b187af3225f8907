#include "base/aead.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <memory>

#include "base/base64.h"
#include "base/fd.h"

namespace vessel {

namespace {

constexpr std::string_view kPrefix = "v1:";
constexpr size_t kNonce = 12, kTag = 16;

using Ctx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

const unsigned char* bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}
unsigned char* bytes(std::string& s) { return reinterpret_cast<unsigned char*>(s.data()); }

Status checkKey(std::string_view key) {
  if (key.size() != kAeadKeyBytes)
    return Error(Code::kInvalidArgument, "an encryption key is " + std::to_string(kAeadKeyBytes) +
                                             " bytes, not " + std::to_string(key.size()));
  return okStatus();
}

}  // namespace

bool aeadSealed(std::string_view text) { return text.substr(0, kPrefix.size()) == kPrefix; }

Result<std::string> aeadSeal(std::string_view key, std::string_view context,
                             std::string_view plain) {
  VESSEL_TRY(checkKey(key));
  if (plain.size() > kAeadMaxPlaintext)
    return Error(Code::kInvalidArgument, "a secret is at most 1 MiB");
  std::string out(kNonce + plain.size() + kTag, '\0');
  if (RAND_bytes(bytes(out), kNonce) != 1) return Error(Code::kInternal, "RAND_bytes failed");
  Ctx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int n = 0, fin = 0;
  if (!ctx ||
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, bytes(key), bytes(out)) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &n, bytes(context), static_cast<int>(context.size())) !=
          1 ||
      EVP_EncryptUpdate(ctx.get(), bytes(out) + kNonce, &n, bytes(plain),
                        static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), bytes(out) + kNonce + n, &fin) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTag,
                          bytes(out) + kNonce + plain.size()) != 1)
    return Error(Code::kInternal, "AES-256-GCM encryption failed");
  return std::string(kPrefix) + base64Encode(out);
}

Result<std::string> aeadOpen(std::string_view key, std::string_view context,
                             std::string_view sealed) {
  VESSEL_TRY(checkKey(key));
  if (!aeadSealed(sealed)) return Error(Code::kInvalidArgument, "not a sealed value");
  auto raw = base64Decode(sealed.substr(kPrefix.size()), kAeadMaxPlaintext * 2);
  if (!raw.ok() || raw->size() < kNonce + kTag)
    return Error(Code::kInvalidArgument, "a sealed value that is not well formed");
  size_t len = raw->size() - kNonce - kTag;
  std::string plain(len, '\0');
  Ctx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int n = 0, fin = 0;
  std::string tag = raw->substr(kNonce + len);
  bool ok =
      ctx &&
      EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, bytes(key), bytes(*raw)) == 1 &&
      EVP_DecryptUpdate(ctx.get(), nullptr, &n, bytes(context), static_cast<int>(context.size())) ==
          1 &&
      EVP_DecryptUpdate(ctx.get(), bytes(plain), &n, bytes(*raw) + kNonce, static_cast<int>(len)) ==
          1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTag, bytes(tag)) == 1 &&
      EVP_DecryptFinal_ex(ctx.get(), bytes(plain) + n, &fin) == 1;
  if (!ok)
    return Error(Code::kPermissionDenied,
                 "a sealed value did not open: another key, another record, or changed bytes");
  return plain;
}

std::string aeadDeriveKey(std::string_view secret, std::string_view label) {
  unsigned char md[32];
  unsigned int len = sizeof md;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), bytes(label), label.size(), md,
       &len);
  return std::string(reinterpret_cast<char*>(md), len);
}

Result<std::string> aeadKeyFile(const std::string& path) {
  auto existing = Fd::open(path, O_RDONLY);
  if (existing.ok()) {
    char buf[kAeadKeyBytes + 1];
    ssize_t n = ::read(existing->get(), buf, sizeof buf);
    if (n != static_cast<ssize_t>(kAeadKeyBytes))
      return Error(Code::kInvalidArgument,
                   path + ": expected a " + std::to_string(kAeadKeyBytes) + "-byte key");
    return std::string(buf, kAeadKeyBytes);
  }
  std::string key(kAeadKeyBytes, '\0');
  if (RAND_bytes(bytes(key), kAeadKeyBytes) != 1)
    return Error(Code::kInternal, "RAND_bytes failed");
  // A temporary file renamed into place: a crash never leaves a short key.
  std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  VESSEL_ASSIGN_OR_RETURN(Fd fd, Fd::open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600));
  if (::write(fd.get(), key.data(), key.size()) != static_cast<ssize_t>(key.size()))
    return Error::fromErrno("write " + tmp);
  if (::fsync(fd.get()) != 0) return Error::fromErrno("fsync " + tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Error::fromErrno("rename " + tmp);
  return key;
}

}  // namespace vessel
