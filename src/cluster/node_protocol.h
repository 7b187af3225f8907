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
#include "ops/volume_keeper.h"
#include "ops/volume_mounter.h"

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
  // volume_* (cluster/cluster_volumes.h): the volume's id; volume_copy's
  // new volume in `volume_to` (read-only: a snapshot). volume_create: its
  // size. Files calls: the volume's read_only, the path within it, mkdir's
  // and write's mode, mkdir's parents, remove's recursive. volume_mount:
  // the sandbox (`id`) and what it mounts; volume_quiesce: `hold`.
  std::string volume, volume_to;
  uint64_t size_mib = 0;
  bool read_only = false;
  std::string path;
  uint32_t mode = 0;
  bool parents = false, recursive = false, hold = false;
  std::vector<ops::VolumeAttachment> mounts;
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
  std::vector<ops::VolumeFileInfo> entries;      // volume_list
  std::optional<ops::VolumeFileInfo> file;       // volume_write: the file as written
  std::optional<ops::VolumeUsage> volume_usage;  // volume_usage
};
std::string serializeNodeReply(const NodeReply& r);
// kProtocol for a reply that is not one.
Result<NodeReply> parseNodeReply(std::string_view body);

std::string_view holdingName(ops::Holding h);

// volume_write streams its body (the file): the call rides in this header,
// base64 of its JSON, so that the node refuses it before any of the file
// is sent (the replica asks with Expect: 100-continue).
inline constexpr std::string_view kNodeCallHeader = "X-Vessel-Node-Call";
std::string encodeNodeCallHeader(const NodeCall& c);
Result<NodeCall> parseNodeCallHeader(std::string_view value);

// The shared secret of the node API, compared in constant time.
bool tokenMatches(std::string_view presented, std::string_view expected);

}  // namespace vessel::cluster
