#include "gateway/credentials/scrubber.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <utility>

namespace vessel::gateway::credentials {

Scrubber::Scrubber(std::vector<std::string> secrets) {
  for (auto& s : secrets) {
    if (s.size() >= 6) secrets_.push_back(std::move(s));
  }
}

std::string Scrubber::process(std::string_view in) {
  std::string buf = carry_;
  buf.append(in);
  carry_.clear();
  for (const std::string& s : secrets_) {
    for (size_t at = buf.find(s); at != std::string::npos; at = buf.find(s, at + s.size())) {
      std::fill_n(buf.begin() + static_cast<std::ptrdiff_t>(at), s.size(), '*');
    }
  }
  // Hold back the longest suffix that is a proper prefix of some secret.
  size_t hold = 0;
  for (const std::string& s : secrets_) {
    for (size_t k = std::min(s.size() - 1, buf.size()); k > hold; --k) {
      if (std::string_view(buf).substr(buf.size() - k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  carry_ = buf.substr(buf.size() - hold);
  buf.resize(buf.size() - hold);
  return buf;
}

std::string Scrubber::flush() { return std::exchange(carry_, std::string()); }

std::vector<std::string> secretForms(std::string_view value) {
  std::vector<std::string> raw{std::string(value)};
  size_t sp = value.rfind(' ');
  if (sp != std::string_view::npos && sp + 1 < value.size()) {
    raw.emplace_back(value.substr(sp + 1));
  }
  std::vector<std::string> out = raw;
  for (const std::string& r : raw) {
    std::string b64(4 * ((r.size() + 2) / 3) + 1, '\0');
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                            reinterpret_cast<const unsigned char*>(r.data()),
                            static_cast<int>(r.size()));
    b64.resize(static_cast<size_t>(n));
    // Without padding too: a secret embedded mid-stream is unpadded.
    while (!b64.empty() && b64.back() == '=') b64.pop_back();
    if (b64.size() > 8) out.push_back(b64.substr(0, b64.size() - 2));
    std::string pct;
    static const char* kHex = "0123456789ABCDEF";
    for (unsigned char c : r) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
        pct.push_back(static_cast<char>(c));
      } else {
        pct += {'%', kHex[c >> 4], kHex[c & 15]};
      }
    }
    if (pct != r) out.push_back(pct);
  }
  return out;
}

}  // namespace vessel::gateway::credentials
