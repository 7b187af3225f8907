#include "e2b/access_token.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <unistd.h>

#include "base/fd.h"
#include "store/store.h"

namespace vessel::e2b {
namespace {

constexpr size_t kKeyBytes = 32;

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

}  // namespace

Result<AccessTokens> AccessTokens::open(const std::string& state_dir) {
  std::string path = state_dir + "/e2b-token-key";
  auto existing = Fd::open(path, O_RDONLY);
  if (existing.ok()) {
    char buf[kKeyBytes + 1];
    ssize_t n = ::read(existing->get(), buf, sizeof buf);
    if (n != static_cast<ssize_t>(kKeyBytes))
      return Error(Code::kInvalidArgument,
                   path + ": expected a " + std::to_string(kKeyBytes) + "-byte key");
    return AccessTokens(std::string(buf, kKeyBytes));
  }
  std::string key(kKeyBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), kKeyBytes) != 1)
    return Error(Code::kInternal, "RAND_bytes failed");
  // A temporary file renamed into place: a crash never leaves a short key.
  std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  VESSEL_ASSIGN_OR_RETURN(Fd fd, Fd::open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600));
  if (::write(fd.get(), key.data(), key.size()) != static_cast<ssize_t>(key.size()))
    return Error::fromErrno("write " + tmp);
  if (::fsync(fd.get()) != 0) return Error::fromErrno("fsync " + tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Error::fromErrno("rename " + tmp);
  return AccessTokens(std::move(key));
}

Result<AccessTokens> AccessTokens::fromStore(store::Store& store) {
  unsigned char key[kKeyBytes];
  if (RAND_bytes(key, kKeyBytes) != 1) return Error(Code::kInternal, "RAND_bytes failed");
  VESSEL_ASSIGN_OR_RETURN(std::string stored,
                          store.getOrSetMeta("e2b_token_key", hex(key, kKeyBytes)));
  if (stored.size() != 2 * kKeyBytes)
    return Error(Code::kInvalidArgument, "the store's e2b_token_key is not a 32-byte hex key");
  std::string raw;
  for (size_t i = 0; i < stored.size(); i += 2) {
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = nibble(stored[i]), lo = nibble(stored[i + 1]);
    if (hi < 0 || lo < 0)
      return Error(Code::kInvalidArgument, "the store's e2b_token_key is not a 32-byte hex key");
    raw.push_back(static_cast<char>(hi << 4 | lo));
  }
  return AccessTokens(std::move(raw));
}

AccessTokens AccessTokens::withKey(std::string key) { return AccessTokens(std::move(key)); }

std::string AccessTokens::forSandbox(std::string_view sandbox_id) const {
  return mac("envd-access-token:", sandbox_id);
}

std::string AccessTokens::trafficForSandbox(std::string_view sandbox_id) const {
  return mac("traffic-access-token:", sandbox_id);
}

std::string AccessTokens::mac(std::string_view label, std::string_view sandbox_id) const {
  std::string msg(label);
  msg.append(sandbox_id);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), md, &n);
  return hex(md, n);
}

bool AccessTokens::check(std::string_view sandbox_id, std::string_view token) const {
  std::string want = forSandbox(sandbox_id);
  return token.size() == want.size() && CRYPTO_memcmp(want.data(), token.data(), want.size()) == 0;
}

}  // namespace vessel::e2b
