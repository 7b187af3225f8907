#pragma once
// The node API's messages (docs/design.md, "Many machines"): what an API
// replica sends a node (vesseld --role=node) and what it answers, as typed
// structs and their JSON. Requests are parsed once, here, at the node's
// edge: every field typed, every string and list bounded, ids restricted to
// the characters ids have. A node serves exactly the ops::Node calls.
#include <boost/json/object.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "ops/node.h"

namespace vessel::cluster {

// Every request carries a sandbox (`id`) and, where the call needs it, its
// tenant; the other fields belong to one call each. `network` is the new
// settings of a `network` call as well as a create's.
struct NodeCall {
  std::string id, tenant;
  // create
  std::string template_name;
  std::vector<std::string> env;
  bool cold = false;
  uint64_t disk_mib = 0;
  std::optional<ops::NetworkSpec> network;
  // pause: false keeps only the disk ("memory": false on the wire)
  bool memory = true;
  // fork
  std::vector<std::string> copies;
  // credential: the credential's name (id is unused)
  std::string credential;
  // build: the base template's stored name and the build spec (its JSON;
  // the stored name of the new template is `template_name`). fork_template:
  // `id` and the new template's stored name in `template_name`.
  std::string base, spec;
  // build: a from_image build's registry credential, resolved by the API
  // replica (the node never reads credentials for a build).
  std::string registry_username, registry_password;
};

// The one parser of request bodies: kInvalidArgument for anything else
// than the call's fields with their types and bounds.
Result<NodeCall> parseNodeCall(std::string_view body);
std::string serializeNodeCall(const NodeCall& c);

// An answer: the call's outcome, what the node holds of the sandbox after
// it (so the caller's next decision needs no second round trip), and per
// call extras.
struct NodeReply {
  Status status = okStatus();
  ops::Holding holding = ops::Holding::kNothing;
  std::vector<Status> copies;  // fork
  std::optional<ops::Usage> usage;
  std::optional<ops::NetworkSpec> network;  // network: the settings as the node stored them
  std::string manifest;  // build, fork_template: the new template's manifest (JSON)
};
std::string serializeNodeReply(const NodeReply& r);
// kProtocol for a reply that is not one.
Result<NodeReply> parseNodeReply(std::string_view body);

std::string_view holdingName(ops::Holding h);

// The shared secret of the node API, compared in constant time.
bool tokenMatches(std::string_view presented, std::string_view expected);

}  // namespace vessel::cluster
