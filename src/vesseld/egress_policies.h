#pragma once
// The node's side of egress (docs/gateway.md): each sandbox's network
// settings, stored, and registered with the egress gateway under its slot's
// source address whenever the sandbox has a VM. LocalNode calls it at every
// step of a VM's life (prepare at create, attach once it runs, detach
// before it stops); the lifecycle reaches it only through ops::Node.
// Secrets go from the store to the gateway only: nothing in a response or
// in the guest carries them.
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <functional>
#include <map>
#include <string>

#include "node/guest_network.h"
#include "node/network/egress.h"
#include "node/runtime.h"
#include "ops/node.h"
#include "store/store.h"

namespace vessel::vesseld {

// Refuses a wildcard rule (allow or inspect) on a public suffix (`*.co.uk`,
// `*.github.io`): unless the operator allows them, a policy names whole
// registrable domains.
Status checkWildcards(const ops::NetworkSpec& s);

class EgressPolicies {
 public:
  // egress may be null (vesseld --no-egress): then only mode none is possible.
  // default_mode: what a sandbox created without a network policy gets
  // (vesseld --default-network; "none" unless the operator says "full").
  EgressPolicies(store::Store& store, node::network::Egress* egress,
                 std::string default_mode = "none")
      : store_(store), egress_(egress), default_mode_(std::move(default_mode)) {}

  // Where a credential's value comes from: by default the store, which
  // opens it with the API side's key (one machine); a cluster node has no
  // key and reads what a replica sealed for the sandbox
  // (cluster/credential_share.h). nullopt: no such credential.
  using CredentialReader = std::function<Result<std::optional<store::CredentialRecord>>(
      const std::string& tenant, const std::string& sandbox_id, const std::string& name)>;
  void readCredentialsWith(CredentialReader r) { read_credential_ = std::move(r); }

  // vesseld --allow-public-suffix-wildcards: `*.co.uk` and the like are
  // accepted (refused by default).
  void allowPublicSuffixWildcards(bool allow) { allow_public_suffix_wildcards_ = allow; }

  // The defaults for a sandbox created without settings.
  ops::NetworkSpec defaults() const;
  // At create, before the VM exists: checks the settings against this node
  // and the tenant's credentials, stores them, and says how the guest is set up.
  Result<node::GuestNetwork> prepare(const std::string& tenant, const std::string& sandbox_id,
                                     const ops::NetworkSpec& s);
  // A fork: `child` gets the network settings `parent` has now.
  Status inherit(const std::string& parent, const std::string& child);
  // The gateway calls below wait for the gateway (up to its 5 s timeout)
  // without holding the io thread (node::network::Egress).
  // Once the sandbox has a VM (create, resume, fork): registers its policy with the
  // gateway. An error means the sandbox must not run (it would have no
  // network it was promised, or one it was not).
  boost::asio::awaitable<Status> attach(std::string tenant, std::shared_ptr<node::Sandbox> sb);
  // New settings for an existing sandbox: checked, stored, and registered
  // at once while it has a VM. An empty mode is the node's default.
  // Returns the settings as stored.
  boost::asio::awaitable<Result<ops::NetworkSpec>> update(std::string tenant, std::string id,
                                                          ops::NetworkSpec s, bool paused);
  // Before the VM goes (pause, delete, shutdown): the gateway forgets it and
  // resets its connections.
  boost::asio::awaitable<void> detach(std::string sandbox_id);
  // The settings as stored (mode none for a sandbox from before egress).
  Result<ops::NetworkSpec> stored(const std::string& sandbox_id);
  // The tenant's credential changed or went: every attached sandbox of the
  // tenant whose settings name it gets its policy again (the gateway
  // resets its connections that carried the old value). Failures are logged.
  boost::asio::awaitable<void> credentialChanged(std::string tenant, std::string credential);

 private:
  // The gateway's policy object for `s` (credentials resolved from the store).
  // strict: a missing credential is an error (create, PUT); otherwise it is
  // left out with a warning (resume after the credential was deleted).
  Result<boost::json::object> policyFor(const std::string& tenant, const std::string& sandbox_id,
                                        const ops::NetworkSpec& s, bool strict = true);

  store::Store& store_;
  node::network::Egress* egress_;
  std::string default_mode_;
  bool allow_public_suffix_wildcards_ = false;
  CredentialReader read_credential_ = [this](const std::string& tenant, const std::string&,
                                             const std::string& name) {
    return store_.getCredential(tenant, name);
  };
  struct Attached {
    std::string tenant, source;
  };
  std::map<std::string, Attached> attached_;  // sandbox id -> its registration
};

}  // namespace vessel::vesseld
