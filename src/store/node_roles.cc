#include "store/node_roles.h"

#include <cctype>
#include <pqxx/pqxx>

namespace vessel::store {

namespace {

// What a node's store calls touch (vesseld --role=node); each table's
// policy (migrations 13, 15 and 17) narrows the rows. Not credentials: a node
// reads its sandboxes' as sealed for it (sandbox_credentials).
constexpr const char* kGrants[] = {
    "GRANT SELECT ON schema_migrations, meta, nodes, sandboxes, sandbox_credentials,"
    " sandbox_network, sandbox_ingress, sessions, operations, events, sandbox_logs, templates,"
    " volumes, volume_mounts TO {role}",
    "GRANT INSERT, UPDATE ON meta, nodes, sandbox_network, sandbox_ingress, operations, templates"
    " TO {role}",
    "GRANT UPDATE ON sandboxes TO {role}",
    "GRANT INSERT ON events, sandbox_logs TO {role}",
    "GRANT DELETE ON sessions, sandbox_logs TO {role}",
};

bool nodeName(const std::string& n) {
  if (n.empty() || n.size() > 63) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

}  // namespace

Status createNodeRole(const std::string& url, const std::string& node,
                      const std::string& password) {
  if (!nodeName(node))
    return Error(Code::kInvalidArgument,
                 "node name may hold letters, digits, '-', '_', '.' (at most 63)");
  if (password.size() < 16)
    return Error(Code::kInvalidArgument, "a node's store password has at least 16 characters");
  const std::string what = "create the store role of node " + node;
  try {
    pqxx::connection c(url);
    pqxx::work w(c);
    auto version = w.exec1("SELECT coalesce(max(number), 0) FROM schema_migrations")[0].as<int>();
    if (version < 17)
      return Error(Code::kFailedPrecondition,
                   what + ": the store is not migrated (start an API replica first)");
    auto exists = w.exec1("SELECT count(*) FROM pg_roles WHERE rolname=" + w.quote(node));
    if (exists[0].as<int>() > 0) return Error(Code::kAlreadyExists, what + ": the role exists");
    const std::string role = w.quote_name(node);
    w.exec0("CREATE ROLE " + role + " LOGIN PASSWORD " + w.quote(password));
    for (std::string g : kGrants) {
      g.replace(g.find("{role}"), 6, role);
      w.exec0(g);
    }
    w.commit();
  } catch (const pqxx::broken_connection& e) {
    return Error(Code::kUnavailable, what + ": " + e.what());
  } catch (const std::exception& e) {
    return Error(Code::kFailedPrecondition, what + ": " + e.what());
  }
  return okStatus();
}

}  // namespace vessel::store
