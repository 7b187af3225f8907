#include "api/auth.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/sha256.h"

namespace vessel::api {

Result<std::string> randomToken(std::string_view prefix) {
  unsigned char b[32];
  if (RAND_bytes(b, sizeof b) != 1)
    return Error(Code::kInternal, "new " + std::string(prefix) + " token: RAND_bytes");
  static const char* k = "0123456789abcdef";
  std::string s(prefix);
  for (unsigned char x : b) {
    s.push_back(k[x >> 4]);
    s.push_back(k[x & 15]);
  }
  return s;
}

Result<std::string> newApiKey() { return randomToken("vsk_"); }

std::optional<std::string_view> bearerToken(const Request& req) {
  auto it = req.find(http::field::authorization);
  if (it == req.end()) return std::nullopt;
  std::string_view v = it->value();
  constexpr std::string_view kBearer = "Bearer ";
  if (v.size() <= kBearer.size() || v.substr(0, kBearer.size()) != kBearer || v.size() > 512)
    return std::nullopt;
  return v.substr(kBearer.size());
}

Result<std::string> authenticate(const Request& req, store::Store& store) {
  auto key = bearerToken(req);
  if (!key) return Error(Code::kUnauthenticated, "missing or invalid API key");
  return tenantForKey(*key, store);
}

Result<std::string> tenantForKey(std::string_view key, store::Store& store) {
  Error denied(Code::kUnauthenticated, "missing or invalid API key");
  if (key.empty() || key.size() > 512) return denied;
  auto tenant = store.tenantForKey(sha256Hex(key));
  if (!tenant.ok()) return std::move(tenant).error().withContext("authenticate");
  if (!tenant->has_value()) return denied;
  return **tenant;
}

Result<std::string> ensureDevTenant(store::Store& store, const std::string& state_dir) {
  VESSEL_ASSIGN_OR_RETURN(int64_t n, store.countTenants());
  if (n > 0) return std::string();
  VESSEL_ASSIGN_OR_RETURN(std::string key, newApiKey());
  std::string path = state_dir + "/dev-api-key";
  // Written before the tenant exists: a crash in between leaves a file that
  // the next start replaces, never a tenant whose only key nobody has.
  ::unlink(path.c_str());
  VESSEL_ASSIGN_OR_RETURN(Fd fd, Fd::open(path, O_WRONLY | O_CREAT | O_EXCL, 0600));
  std::string line = key + "\n";
  if (::write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    return Error::fromErrno("write " + path);
  if (::fsync(fd.get()) != 0) return Error::fromErrno("fsync " + path);
  VESSEL_TRY(store.createTenant("dev", "development"));
  VESSEL_TRY(store.addApiKey("dev", sha256Hex(key)));
  return key;
}

}  // namespace vessel::api
