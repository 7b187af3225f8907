#pragma once
// Credentials reach a node only for the sandboxes it runs (issue 24, item
// 5; docs/threat-model.md, "Many machines"). Values are sealed at rest
// under the API replicas' key, which no node holds (store.h). Before a
// replica asks a node to run a sandbox (create, resume, fork, adopt, a
// network change) or tells it a credential changed, it opens the
// credentials the sandbox's settings name and seals each again for that
// node, under a key derived from the node's own token, into the store's
// sandbox_credentials rows of that sandbox; the node's store role reads
// only its own live sandboxes' rows (migration 15), and only its token
// opens them. A sealed row names its sandbox and credential: copied to
// another sandbox it does not open.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "store/store.h"

namespace vessel::cluster {

// The key a node's sandbox credentials are sealed under, from its token.
std::string nodeCredentialKey(std::string_view node_token);

Result<std::string> sealForNode(std::string_view node_key, const std::string& sandbox_id,
                                const store::CredentialRecord& c);
// kPermissionDenied when it does not open (another node's, another
// sandbox's, or changed); the record's tenant is `tenant`.
Result<store::CredentialRecord> openForNode(std::string_view node_key, const std::string& tenant,
                                            const std::string& sandbox_id, const std::string& name,
                                            std::string_view sealed);

// API side: the credentials `names` of `tenant` (those that exist), sealed
// for the node whose token is `node_token`, replace the sandbox's rows.
Status shareCredentials(store::Store& store, const std::string& tenant,
                        const std::string& sandbox_id, const std::vector<std::string>& names,
                        std::string_view node_token);

// Node side: the credential `name` of a sandbox placed here, as a replica
// sealed it for this node (nullopt: none shared, e.g. it was deleted).
Result<std::optional<store::CredentialRecord>> sharedCredential(store::Store& store,
                                                                std::string_view node_key,
                                                                const std::string& tenant,
                                                                const std::string& sandbox_id,
                                                                const std::string& name);

}  // namespace vessel::cluster
