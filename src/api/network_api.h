#pragma once
// The egress side of the API (api/openapi.yaml, docs/gateway.md): a
// sandbox's network settings (at create and live with
// PUT /v1/sandboxes/{id}/network) and the tenant's credentials
// (POST/GET /v1/credentials, DELETE /v1/credentials/{name}). Settings are
// stored; whenever a sandbox has a VM they are registered with the node's
// gateway under its slot's source address. Secrets go from the store to the
// gateway only: no response and nothing in the guest carries them.
#include <boost/json/value.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/http_server.h"
#include "api/network_settings.h"
#include "node/network/egress.h"
#include "node/runtime.h"
#include "store/store.h"

namespace vessel::api {

class NetworkApi {
 public:
  // egress may be null (vesseld --no-egress): then only mode none is possible.
  // default_mode: what a sandbox created without a network policy gets
  // (vesseld --default-network; "none" unless the operator says "full").
  NetworkApi(store::Store& store, node::network::Egress* egress, std::string default_mode = "none")
      : store_(store), egress_(egress), default_mode_(std::move(default_mode)) {}

  // Handles /v1/credentials[/name] and /v1/sandboxes/{id}/network (`seg`
  // is the split path, seg[0] == "v1"); nullopt when the path is not ours.
  std::optional<Response> handle(const Request& req, const std::string& tenant,
                                 const std::vector<std::string>& seg);

  // vesseld --allow-public-suffix-wildcards: `*.co.uk` and the like are
  // accepted (refused by default).
  void allowPublicSuffixWildcards(bool allow) { allow_public_suffix_wildcards_ = allow; }

  // The defaults for a create request without `network`.
  NetworkSettings defaults() const;
  // At create, before the VM exists: checks the settings against this node
  // and the tenant's credentials, stores them, and says how the guest is set up.
  Result<node::GuestNetwork> prepare(const std::string& tenant, const std::string& sandbox_id,
                                     const NetworkSettings& s);
  // A fork: `child` gets the network settings `parent` has now.
  Status inherit(const std::string& parent, const std::string& child);
  // Once the sandbox has a VM (create, resume, fork): registers its policy with the
  // gateway. An error means the sandbox must not run (it would have no
  // network it was promised, or one it was not).
  Status attach(const std::string& tenant, const node::Sandbox& sb);
  // New settings for an existing sandbox (PUT network, ops::Node::updateNetwork):
  // checked, stored, and registered at once while it has a VM. An empty mode
  // is the node's default. Returns the settings as stored.
  Result<NetworkSettings> update(const std::string& tenant, const std::string& id,
                                 NetworkSettings s, bool paused);
  // Before the VM goes (pause, delete, shutdown): the gateway forgets it and
  // resets its connections.
  void detach(const std::string& sandbox_id);

 private:
  Response putNetwork(const Request& req, const std::string& tenant, const std::string& id);
  Response getNetwork(const Request& req, const std::string& tenant, const std::string& id);
  Response createCredential(const Request& req, const std::string& tenant);
  Response listCredentials(const Request& req, const std::string& tenant);
  Response deleteCredential(const Request& req, const std::string& tenant, const std::string& name);
  Result<NetworkSettings> stored(const std::string& sandbox_id);
  // The gateway's policy object for `s` (credentials resolved from the store).
  // strict: a missing credential is an error (create, PUT); otherwise it is
  // left out with a warning (resume after the credential was deleted).
  Result<boost::json::object> policyFor(const std::string& tenant, const NetworkSettings& s,
                                        bool strict = true);

  store::Store& store_;
  // Re-sends the policy of every attached sandbox of `tenant` that uses
  // `credential` (after it changed or was deleted).
  void refreshUsers(const std::string& tenant, const std::string& credential);
  node::network::Egress* egress_;
  std::string default_mode_;
  bool allow_public_suffix_wildcards_ = false;
  struct Attached {
    std::string tenant, source;
  };
  std::map<std::string, Attached> attached_;  // sandbox id -> its registration
};

}  // namespace vessel::api
