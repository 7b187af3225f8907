#include "base/new_id.h"

#include <sys/random.h>

#include <random>

namespace vessel {

std::string newId(const std::string& prefix) {
  unsigned char b[6];
  if (::getrandom(b, sizeof b, 0) != sizeof b) {
    std::random_device rd;
    for (auto& x : b) x = static_cast<unsigned char>(rd());
  }
  static const char* k = "0123456789abcdef";
  std::string s = prefix + "-";
  for (unsigned char x : b) {
    s.push_back(k[x >> 4]);
    s.push_back(k[x & 15]);
  }
  return s;
}

}  // namespace vessel
