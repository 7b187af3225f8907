#pragma once
// The credentials' statements for the SQL store (sql_store.cc), written
// once for both engines: values sealed at rest under the API replicas' key
// (store.h, useCredentialKey), and each sandbox's credentials as sealed for
// its node (migration 14).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/sql.h"
#include "store/store.h"

namespace vessel::store {

// What a credential's sealed value is bound to: its tenant and name, so a
// value copied into another row does not open.
std::string credentialSealContext(const std::string& tenant_id, const std::string& name);

// `key` empty: kFailedPrecondition (this side holds no credential key).
Result<int> sealPlainCredentials(Sql& q, const std::string& key);
Status putCredential(Sql& q, const std::string& key, CredentialRecord c);
Result<std::vector<CredentialRecord>> listCredentials(Sql& q, const std::string& key,
                                                      const std::string& tenant_id);
Result<std::optional<CredentialRecord>> getCredential(Sql& q, const std::string& key,
                                                      const std::string& tenant_id,
                                                      const std::string& name);

Status setSandboxCredentials(Sql& q, const std::string& sandbox_id,
                             const std::map<std::string, std::string>& sealed);
Result<std::optional<std::string>> sandboxCredential(Sql& q, const std::string& sandbox_id,
                                                     const std::string& name);

}  // namespace vessel::store
