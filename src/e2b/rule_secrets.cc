#include "e2b/rule_secrets.h"

#include <boost/json.hpp>
#include <string>

namespace vessel::e2b {

namespace {

// A DNS name compared as DNS compares it: ASCII case folded, one trailing
// dot dropped (the rule's host and the credential's are both bounded names).
std::string folded(std::string_view n) {
  if (!n.empty() && n.back() == '.') n.remove_suffix(1);
  std::string out(n);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

bool secretServesHost(std::string_view name, const std::vector<std::string>& hosts,
                      std::string_view host) {
  if (name.starts_with("e2b-rule-")) return false;
  if (hosts.empty()) return true;  // host-less: an E2B secret
  std::string want = folded(host);
  if (want.empty()) return false;
  for (const auto& h : hosts)
    if (folded(h) == want) return true;
  return false;
}

}  // namespace vessel::e2b
