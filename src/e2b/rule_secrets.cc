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

bool secretServesHost(std::string_view name, std::string_view hosts_json, std::string_view host) {
  if (name.starts_with("e2b-rule-")) return false;
  boost::system::error_code ec;
  boost::json::value hosts = boost::json::parse(hosts_json, ec);
  if (ec || !hosts.is_array()) return false;  // unreadable: bound to nothing we can check
  if (hosts.as_array().empty()) return true;  // host-less: an E2B secret
  std::string want = folded(host);
  if (want.empty()) return false;
  for (const auto& h : hosts.as_array())
    if (h.is_string() && folded(std::string_view(h.as_string())) == want) return true;
  return false;
}

}  // namespace vessel::e2b
