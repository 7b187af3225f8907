// The credentials behind E2B's header rules (network.rules with a
// `transform.headers`): one Vessel credential per rule, named e2b-rule-<hex>,
// made through the lifecycle before the sandbox that uses it is created or
// changed, and deleted with it (docs/e2b.md).
#include "base/new_id.h"
#include "e2b/rest.h"
#include "e2b/rest_states.h"
#include "e2b/rule_secrets.h"

namespace vessel::e2b {

asio::awaitable<Result<ops::NetworkSpec>> RestApi::egressSpec(std::string tenant, const Egress& e) {
  ops::NetworkSpec spec = e.spec;
  auto made = co_await makeRuleCredentials(tenant, e, spec);
  if (!made.ok()) {
    co_await dropRuleCredentials(tenant, spec.credentials);  // those made before the failing one
    co_return std::move(made).error();
  }
  co_return spec;
}

asio::awaitable<Status> RestApi::makeRuleCredentials(std::string tenant, const Egress& e,
                                                     ops::NetworkSpec& spec) {
  for (const auto& rule : e.headers) {
    auto value = expandSecrets(rule.value, [&](const std::string& name) -> Result<std::string> {
      VESSEL_ASSIGN_OR_RETURN(auto c, lifecycle_.egress().credential(tenant, name));
      // A credential bound to other hosts never goes to this one.
      if (!c || !secretServesHost(c->name, c->hosts, rule.host))
        return Error(Code::kInvalidArgument, "secret '" + name +
                                                 "' does not exist or is bound to "
                                                 "hosts other than " +
                                                 rule.host);
      return c->value;
    });
    if (!value.ok()) co_return std::move(value).error();
    for (char ch : *value)
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
        co_return Error(Code::kInvalidArgument,
                        "header " + rule.header + " holds control characters");
    // One credential per rule: the gateway injects it for that host only.
    // Through the lifecycle, as every credential write is, so the node
    // hears of it (ops::Node::credentialChanged).
    ops::CredentialSpec c;
    c.name = "e2b-rule-" + newId("c").substr(2);
    c.hosts = {rule.host};
    c.header = rule.header;
    c.value = *value;
    if (auto put = co_await lifecycle_.egress().putCredential(tenant, c); !put.ok())
      co_return std::move(put).error();
    spec.credentials.push_back(c.name);
  }
  co_return okStatus();
}

asio::awaitable<void> RestApi::dropRuleCredentials(std::string tenant,
                                                   std::vector<std::string> names,
                                                   std::string ending) {
  std::erase_if(names, [](const std::string& n) { return !n.starts_with("e2b-rule-"); });
  if (names.empty()) co_return;
  // A fork's copies carry their parent's network settings, rule
  // credentials included: a credential goes with the last live sandbox
  // that names it, never while a parent or a sibling still does. Read only
  // when there is one to drop (a sandbox with header rules), and bounded by
  // the tenant's quota of sandboxes.
  auto held = rulesHeldBy(tenant, ending);
  if (!held.ok()) {
    e2bLog().warn("rule credentials of {} kept: {}", ending, held.error().message());
    co_return;  // kept rather than taken from a sandbox that uses it
  }
  for (const auto& name : names) {
    if (held->count(name)) continue;
    if (auto s = co_await lifecycle_.egress().deleteCredential(tenant, name);
        !s.ok() && s.error().code() != Code::kNotFound)
      e2bLog().warn("delete credential {}: {}", name, s.error().message());
  }
}

Result<std::set<std::string>> RestApi::rulesHeldBy(const std::string& tenant,
                                                   const std::string& except) {
  std::set<std::string> held;
  ops::ListRequest l;
  l.tenant = tenant;
  l.page_size = 200;
  for (;;) {
    VESSEL_ASSIGN_OR_RETURN(auto page, lifecycle_.list(l));
    for (const auto& sb : page.sandboxes) {
      if (sb.id == except || sb.state == store::SandboxState::kDeleting ||
          sb.state == store::SandboxState::kDeleted || sb.state == store::SandboxState::kFailed)
        continue;
      for (auto& c : ruleCredentials(tenant, sb.id)) held.insert(std::move(c));
    }
    if (page.next_page_token.empty()) break;
    l.page_token = page.next_page_token;
  }
  return held;
}

std::vector<std::string> RestApi::ruleCredentials(const std::string& tenant,
                                                  const std::string& id) {
  auto net = lifecycle_.egress().network(tenant, id);
  if (!net.ok()) return {};
  std::vector<std::string> out;
  for (const auto& c : net->credentials)
    if (c.starts_with("e2b-rule-")) out.push_back(c);
  return out;
}

}  // namespace vessel::e2b
