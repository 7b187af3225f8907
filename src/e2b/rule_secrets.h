#pragma once
// Which of a tenant's secrets an E2B header rule may place in a request
// (`${e2b.secrets.NAME}` in `network.rules.<host>`): a secret made through
// E2B has no hosts and goes wherever its owner's rules put it; a credential
// the native API bound to hosts only to a rule for one of those hosts, so
// a rule for another host cannot carry it there. The copies made for rules
// (`e2b-rule-*`) are never a rule's source.
#include <string>
#include <string_view>
#include <vector>

namespace vessel::e2b {

// hosts: the credential's host names (none: an E2B secret, any host).
bool secretServesHost(std::string_view name, const std::vector<std::string>& hosts,
                      std::string_view host);

}  // namespace vessel::e2b
