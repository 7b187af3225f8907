#include "e2b/rule_secrets.h"

#include <boost/json.hpp>

#include "gateway/name.h"

namespace vessel::e2b {

bool secretServesHost(std::string_view name, std::string_view hosts_json, std::string_view host) {
  if (name.starts_with("e2b-rule-")) return false;
  boost::system::error_code ec;
  boost::json::value hosts = boost::json::parse(hosts_json, ec);
  if (ec || !hosts.is_array()) return false;  // unreadable: bound to nothing we can check
  if (hosts.as_array().empty()) return true;  // host-less: an E2B secret
  auto want = gateway::normalizeName(host);
  if (!want.ok()) return false;
  for (const auto& h : hosts.as_array()) {
    if (!h.is_string()) continue;
    auto have = gateway::normalizeName(std::string_view(h.as_string()));
    if (have.ok() && *have == *want) return true;
  }
  return false;
}

}  // namespace vessel::e2b
