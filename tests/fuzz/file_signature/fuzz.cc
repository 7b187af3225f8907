// Fuzzes the signed-URL check of envd's /files: the input's NUL-separated
// fields become the path, operation, user, signature and expiration.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "e2b/envd/signature.h"

using namespace vessel::e2b::envd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> f;
  size_t pos = 0;
  while (f.size() < 5) {
    size_t z = in.find('\0', pos);
    f.emplace_back(in.substr(pos, z == std::string_view::npos ? std::string_view::npos : z - pos));
    if (z == std::string_view::npos) break;
    pos = z + 1;
  }
  f.resize(5);
  SignedRequest r{f[0], f[1], f[2], f[3], std::nullopt};
  if (auto e = parseExpiration(f[4]); e.ok()) r.expiration = *e;
  auto st = checkFileSignature(r, "token", 1700000000);
  // Only the token's own signature may pass.
  if (st.ok() && r.signature != fileSignature(r.path, r.operation, r.user, "token", r.expiration))
    __builtin_trap();
  return 0;
}
