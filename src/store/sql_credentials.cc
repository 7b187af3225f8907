#include "store/sql_credentials.h"

#include "base/aead.h"
#include "store/sql_records.h"

namespace vessel::store {

namespace {

Status needKey(const std::string& key) {
  if (key.empty())
    return Error(Code::kFailedPrecondition,
                 "credential values are sealed under the API replicas' key, which this side does "
                 "not hold (vesseld --credential-key-file)");
  return okStatus();
}

const std::string kSelect = "SELECT " + std::string(kCredentialCols) + " FROM credentials";

Result<CredentialRecord> opened(const std::string& key, Result<CredentialRecord> r) {
  if (!r.ok()) return r;
  auto v = aeadOpen(key, credentialSealContext(r->tenant_id, r->name), r->value);
  if (!v.ok())
    return std::move(v).error().withContext("credential '" + r->name + "' of tenant " +
                                            r->tenant_id);
  r->value = std::move(*v);
  return r;
}

}  // namespace

std::string credentialSealContext(const std::string& tenant_id, const std::string& name) {
  return "vessel credential\n" + tenant_id + "\n" + name;
}

Result<int> sealPlainCredentials(Sql& q, const std::string& key) {
  VESSEL_TRY(needKey(key));
  return q.transaction([&]() -> Result<int> {
    VESSEL_ASSIGN_OR_RETURN(auto rows, q.all(readCredential, kSelect));
    int n = 0;
    for (auto& r : rows) {
      if (!r.ok()) return std::move(r).error();
      if (aeadSealed(r->value)) continue;
      VESSEL_ASSIGN_OR_RETURN(
          std::string sealed,
          aeadSeal(key, credentialSealContext(r->tenant_id, r->name), r->value));
      VESSEL_TRY(q.exec("UPDATE credentials SET value=? WHERE tenant_id=? AND name=?", sealed,
                        r->tenant_id, r->name));
      ++n;
    }
    return n;
  });
}

Status putCredential(Sql& q, const std::string& key, CredentialRecord c) {
  VESSEL_TRY(needKey(key));
  VESSEL_ASSIGN_OR_RETURN(c.value,
                          aeadSeal(key, credentialSealContext(c.tenant_id, c.name), c.value));
  VESSEL_TRY(q.exec("INSERT INTO credentials(" + std::string(kCredentialCols) +
                        ") VALUES(?,?,?,?,?,?) ON CONFLICT(tenant_id,name) DO UPDATE SET"
                        " hosts=excluded.hosts, header=excluded.header, value=excluded.value,"
                        " created_ms=excluded.created_ms",
                    c.tenant_id, c.name, stringListJson(c.hosts), c.header, c.value, c.created_ms));
  return okStatus();
}

Result<std::vector<CredentialRecord>> listCredentials(Sql& q, const std::string& key,
                                                      const std::string& tenant_id) {
  VESSEL_TRY(needKey(key));
  VESSEL_ASSIGN_OR_RETURN(
      auto rows, q.all(readCredential, kSelect + " WHERE tenant_id=? ORDER BY name", tenant_id));
  std::vector<CredentialRecord> out;
  for (auto& r : rows) {
    VESSEL_ASSIGN_OR_RETURN(auto c, opened(key, std::move(r)));
    out.push_back(std::move(c));
  }
  return out;
}

Result<std::optional<CredentialRecord>> getCredential(Sql& q, const std::string& key,
                                                      const std::string& tenant_id,
                                                      const std::string& name) {
  VESSEL_TRY(needKey(key));
  VESSEL_ASSIGN_OR_RETURN(
      auto row, q.one(readCredential, kSelect + " WHERE tenant_id=? AND name=?", tenant_id, name));
  if (!row) return std::optional<CredentialRecord>();
  VESSEL_ASSIGN_OR_RETURN(auto c, opened(key, std::move(*row)));
  return std::optional<CredentialRecord>(std::move(c));
}

Status setSandboxCredentials(Sql& q, const std::string& sandbox_id,
                             const std::map<std::string, std::string>& sealed) {
  return q.transaction([&]() -> Status {
    VESSEL_TRY(q.exec("DELETE FROM sandbox_credentials WHERE sandbox_id=?", sandbox_id));
    for (const auto& [name, value] : sealed)
      VESSEL_TRY(q.exec("INSERT INTO sandbox_credentials(sandbox_id,name,sealed) VALUES(?,?,?)",
                        sandbox_id, name, value));
    return okStatus();
  });
}

Result<std::optional<std::string>> sandboxCredential(Sql& q, const std::string& sandbox_id,
                                                     const std::string& name) {
  return q.one([](const SqlRow& r) { return r.text(0); },
               "SELECT sealed FROM sandbox_credentials WHERE sandbox_id=? AND name=?", sandbox_id,
               name);
}

}  // namespace vessel::store
