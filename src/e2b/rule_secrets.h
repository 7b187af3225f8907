#pragma once
// Which of a tenant's secrets an E2B header rule may place in a request
// (`${e2b.secrets.NAME}` in `network.rules.<host>`): a secret made through
// E2B has no hosts and goes wherever its owner's rules put it; a credential
// the native API bound to hosts only to a rule for one of those hosts, so
// a rule for another host cannot carry it there. The copies made for rules
// (`e2b-rule-*`) are never a rule's source.
#include <string_view>

namespace vessel::e2b {

// hosts_json: the credential's stored host list (a JSON array of names).
bool secretServesHost(std::string_view name, std::string_view hosts_json, std::string_view host);

}  // namespace vessel::e2b
