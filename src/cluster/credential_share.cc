#include "cluster/credential_share.h"

#include <boost/json.hpp>

#include "base/aead.h"

namespace vessel::cluster {

namespace json = boost::json;

namespace {

std::string context(const std::string& sandbox_id, const std::string& name) {
  return "vessel sandbox credential\n" + sandbox_id + "\n" + name;
}

}  // namespace

std::string nodeCredentialKey(std::string_view node_token) {
  return aeadDeriveKey(node_token, "vessel node credentials v1");
}

Result<std::string> sealForNode(std::string_view node_key, const std::string& sandbox_id,
                                const store::CredentialRecord& c) {
  json::array hosts;
  for (const auto& h : c.hosts) hosts.emplace_back(h);
  json::object o{{"hosts", std::move(hosts)}, {"header", c.header}, {"value", c.value}};
  return aeadSeal(node_key, context(sandbox_id, c.name), json::serialize(o));
}

Result<store::CredentialRecord> openForNode(std::string_view node_key, const std::string& tenant,
                                            const std::string& sandbox_id, const std::string& name,
                                            std::string_view sealed) {
  VESSEL_ASSIGN_OR_RETURN(std::string text, aeadOpen(node_key, context(sandbox_id, name), sealed));
  // Authenticated above: written by a replica, so a shape error is a bug.
  Error bad(Code::kInternal,
            "credential '" + name + "' shared for " + sandbox_id + " is not well formed");
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return bad;
  const json::object& o = v.as_object();
  const auto *hosts = o.if_contains("hosts"), *header = o.if_contains("header"),
             *value = o.if_contains("value");
  if (!hosts || !hosts->is_array() || !header || !header->is_string() || !value ||
      !value->is_string())
    return bad;
  store::CredentialRecord c;
  c.tenant_id = tenant;
  c.name = name;
  for (const auto& h : hosts->as_array()) {
    if (!h.is_string()) return bad;
    c.hosts.emplace_back(h.as_string());
  }
  c.header = header->as_string();
  c.value = value->as_string();
  return c;
}

Status shareCredentials(store::Store& store, const std::string& tenant,
                        const std::string& sandbox_id, const std::vector<std::string>& names,
                        std::string_view node_token) {
  std::string key = nodeCredentialKey(node_token);
  std::map<std::string, std::string> sealed;
  for (const auto& name : names) {
    VESSEL_ASSIGN_OR_RETURN(auto c, store.getCredential(tenant, name));
    if (!c) continue;  // the node reports it missing (strict) or leaves it out
    VESSEL_ASSIGN_OR_RETURN(sealed[name], sealForNode(key, sandbox_id, *c));
  }
  return store.setSandboxCredentials(sandbox_id, sealed);
}

Result<std::optional<store::CredentialRecord>> sharedCredential(store::Store& store,
                                                                std::string_view node_key,
                                                                const std::string& tenant,
                                                                const std::string& sandbox_id,
                                                                const std::string& name) {
  VESSEL_ASSIGN_OR_RETURN(auto sealed, store.sandboxCredential(sandbox_id, name));
  if (!sealed) return std::optional<store::CredentialRecord>();
  VESSEL_ASSIGN_OR_RETURN(auto c, openForNode(node_key, tenant, sandbox_id, name, *sealed));
  return std::optional<store::CredentialRecord>(std::move(c));
}

}  // namespace vessel::cluster
