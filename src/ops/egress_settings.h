#pragma once
// A sandbox's egress settings and its tenant's credentials (issue 23):
// stored through the node (which owns the gateway registrations) and the
// store, every change reaching the running sandboxes it concerns at once.
// Owned by the Lifecycle (Lifecycle::egress()); it asks the lifecycle only
// for a tenant's sandbox and to note activity.
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "ops/node.h"
#include "store/store.h"

namespace vessel::ops {

namespace asio = boost::asio;

// A credential as a front end checked it: `hosts` are normalized exact
// names (at most 16), `header` a field the gateway may set, `value` the
// secret it sets.
struct CredentialSpec {
  std::string name;
  std::vector<std::string> hosts;
  std::string header, value;
};

class EgressSettings {
 public:
  // The tenant's live sandbox (kNotFound for another tenant's or a deleted
  // one), as Lifecycle::get answers.
  using SandboxOf =
      std::function<Result<store::SandboxRecord>(const std::string& tenant, const std::string& id)>;
  EgressSettings(store::Store& store, Node& node, const WallClock& clock, SandboxOf sandbox_of,
                 std::function<void(const std::string& id)> note_activity)
      : store_(store),
        node_(node),
        clock_(clock),
        sandbox_of_(std::move(sandbox_of)),
        note_activity_(std::move(note_activity)) {}

  // Replaces the tenant's sandbox's egress settings: at once for a running
  // one (its open connections the new policy refuses are reset). kNotFound
  // for an unknown sandbox, kInvalidArgument for settings this node cannot
  // give (a missing credential, egress off). Returns the settings as stored
  // (an empty mode is the node's default).
  asio::awaitable<Result<NetworkSpec>> setNetwork(std::string tenant, std::string id,
                                                  NetworkSpec spec);
  // The tenant's sandbox's egress settings as stored.
  Result<NetworkSpec> network(const std::string& tenant, const std::string& id);
  // The egress settings as its node stored them, by id alone (nullopt:
  // none stored), for a front end rendering a sandbox it already holds.
  Result<std::optional<NetworkSpec>> givenNetwork(const std::string& id);

  // The tenant's credentials (the gateway injects them; values are never
  // read back by a front end). A put replaces one of the same name; a put
  // or delete reaches running sandboxes that use it at once.
  asio::awaitable<Result<store::CredentialRecord>> putCredential(std::string tenant,
                                                                 CredentialSpec c);
  Result<std::vector<store::CredentialRecord>> listCredentials(const std::string& tenant);
  Result<std::optional<store::CredentialRecord>> credential(const std::string& tenant,
                                                            const std::string& name);
  // kNotFound when the tenant has no credential of that name.
  asio::awaitable<Status> deleteCredential(std::string tenant, std::string name);

 private:
  store::Store& store_;
  Node& node_;
  const WallClock& clock_;
  SandboxOf sandbox_of_;
  std::function<void(const std::string&)> note_activity_;
};

}  // namespace vessel::ops
