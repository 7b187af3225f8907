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

Result<std::string> authenticate(const Request& req, store::Store& store) {
  auto key = bearerToken(req);
  if (!key) return Error(Code::kUnauthenticated, "missing or invalid API key");
  return tenantForKey(*key, store);
}

std::string e2bKeyForm(std::string_view key) {
  static const char* k = "0123456789abcdef";
  std::string s = "e2b_";
  for (char c : key) {
    auto x = static_cast<unsigned char>(c);
    s.push_back(k[x >> 4]);
    s.push_back(k[x & 15]);
  }
  return s;
}

std::optional<std::string> decodeE2bKeyForm(std::string_view key) {
  constexpr std::string_view kPrefix = "e2b_";
  constexpr size_t kMaxDecoded = 256;
  if (key.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view hex = key.substr(kPrefix.size());
  if (hex.empty() || hex.size() % 2 != 0 || hex.size() > 2 * kMaxDecoded) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  return out;
}

Result<std::string> tenantForKey(std::string_view key, store::Store& store) {
  Error denied(Code::kUnauthenticated, "missing or invalid API key");
  if (key.empty() || key.size() > 512) return denied;
  // Decoded once: the E2B form of an E2B form is not a key.
  std::optional<std::string> decoded = decodeE2bKeyForm(key);
  if (decoded) key = *decoded;
  if (key.empty()) return denied;
  auto tenant = store.tenantForKey(sha256Hex(key));
  if (!tenant.ok()) return std::move(tenant).error().withContext("authenticate");
  if (!tenant->has_value()) return denied;
  return **tenant;
}

namespace {

// A fresh 0600 file holding `line` (a file of that name is replaced).
Status writeSecretFile(const std::string& path, const std::string& line) {
  ::unlink(path.c_str());
  VESSEL_ASSIGN_OR_RETURN(Fd fd, Fd::open(path, O_WRONLY | O_CREAT | O_EXCL, 0600));
  if (::write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    return Error::fromErrno("write " + path);
  if (::fsync(fd.get()) != 0) return Error::fromErrno("fsync " + path);
  return okStatus();
}

// A state dir from before the E2B form existed: its dev-api-key, if still
// the dev tenant's key, gives the E2B form. Anything else leaves it absent.
Status backfillE2bKeyFile(store::Store& store, const std::string& state_dir) {
  std::string e2b_path = state_dir + "/dev-e2b-api-key";
  if (::access(e2b_path.c_str(), F_OK) == 0) return okStatus();
  auto fd = Fd::open(state_dir + "/dev-api-key", O_RDONLY);
  if (!fd.ok()) return okStatus();
  char buf[600];
  ssize_t n = ::read(fd->get(), buf, sizeof buf);
  if (n <= 0 || n >= static_cast<ssize_t>(sizeof buf)) return okStatus();
  std::string key(buf, static_cast<size_t>(n));
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  auto tenant = tenantForKey(key, store);
  if (!tenant.ok() || *tenant != "dev") return okStatus();
  return writeSecretFile(e2b_path, e2bKeyForm(key) + "\n");
}

}  // namespace

Result<std::string> ensureDevTenant(store::Store& store, const std::string& state_dir) {
  VESSEL_ASSIGN_OR_RETURN(int64_t n, store.countTenants());
  if (n > 0) {
    VESSEL_TRY(backfillE2bKeyFile(store, state_dir));
    return std::string();
  }
  VESSEL_ASSIGN_OR_RETURN(std::string key, newApiKey());
  // Written before the tenant exists: a crash in between leaves files that
  // the next start replaces, never a tenant whose only key nobody has.
  VESSEL_TRY(writeSecretFile(state_dir + "/dev-api-key", key + "\n"));
  VESSEL_TRY(writeSecretFile(state_dir + "/dev-e2b-api-key", e2bKeyForm(key) + "\n"));
  VESSEL_TRY(store.createTenant("dev", "development"));
  VESSEL_TRY(store.addApiKey("dev", sha256Hex(key)));
  return key;
}

}  // namespace vessel::api
