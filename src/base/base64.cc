#include "base/base64.h"

#include <openssl/evp.h>

namespace vessel {

std::string base64Encode(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3), '\0');
  // SAFETY: EVP_EncodeBlock writes exactly 4*ceil(n/3) bytes plus a NUL;
  // the NUL lands in std::string's terminator slot.
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::string> base64Decode(std::string_view in, size_t max_bytes) {
  if (in.size() > max_bytes) return Error(Code::kInvalidArgument, "base64 field too large");
  std::string s(in);
  for (auto& c : s) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  while (s.size() % 4) s.push_back('=');
  std::string out(3 * (s.size() / 4), '\0');
  int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  if (n < 0) return Error(Code::kInvalidArgument, "invalid base64");
  // EVP_DecodeBlock counts the bytes padding stands for; they are not data.
  size_t pad = 0;
  if (!s.empty() && s.back() == '=') ++pad;
  if (s.size() > 1 && s[s.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

}  // namespace vessel
