#pragma once
// "The node" as the lifecycle sees it: the one interface through which ops
// reaches sandboxes (create or restore, pause, resume, fork, destroy, find,
// adopt) and builds templates. vesseld implements it in-process over node::Runtime and the
// egress gateway (src/vesseld/local_node.h); an API replica implements it
// over the node API of many nodes (src/cluster/cluster_node.h), and unit tests implement it with a
// fake (ops/testing/fake_node.h). Nothing here names a hypervisor or a VM.
//
// Every call runs on the lifecycle's io thread. A call that fails leaves
// the node holding what it held before, except where said otherwise.
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/result.h"
#include "store/settings.h"
#include "templates/build_log.h"
#include "templates/build_spec.h"
#include "templates/image_ref.h"
#include "templates/manifest.h"

namespace vessel::agentclient {
class AgentClient;
}

namespace vessel::ops {

namespace asio = boost::asio;

// A sandbox's egress settings as the lifecycle carries them (parsed and
// validated at the API's edge, api/network_settings.h), and its ports'
// ingress settings: the store's types (store/settings.h), whose codec the
// store and the node API share.
using NetworkSpec = store::NetworkSettings;
using IngressSpec = store::IngressSettings;

struct NodeCreate {
  std::string id, tenant;
  std::string template_name;     // the stored name (tenant templates are prefixed)
  std::vector<std::string> env;  // KEY=VALUE
  bool cold = false;             // boot the template's disk instead of restoring it
  uint64_t disk_mib = 0;         // its root disk, grown before it runs (0: the image's size)
  uint64_t memory_mib = 0;       // its guest memory (the template's; placement counts it)
  // The node it must run on ("" any): the one keeping the volumes it
  // mounts (an API replica's placement; one machine has one node).
  std::string node;
};

// A template build as the node takes it: `spec.name` is the name the
// template is stored under (a tenant's own are prefixed, templates/naming.h),
// `base` the stored name of the template whose disk it starts from.
struct BuildRequest {
  templates::BuildSpec spec;
  std::string base;
  std::string tenant;  // whose template it becomes (the cluster's catalogue records it)
  // spec.from_image_credential's value, resolved by the lifecycle from the
  // tenant's credentials: it reaches only the node that pulls.
  templates::RegistryAuth registry_auth;
};
// How a build reports back, on the io thread: `progress` any number of
// times, then `done` once, unless the node shuts down first (then neither
// is called again and the caller ends what it waited for). `log` (a
// Dockerfile build's steps and output) is optional.
struct BuildCallbacks {
  std::function<void(const std::string& step, int percent)> progress;
  std::function<void(const templates::BuildLogEntry&)> log;
  std::function<void(Result<templates::Manifest>)> done;
};

// What the node holds of a sandbox.
enum class Holding { kNothing, kRunning, kPaused };

// What a running sandbox uses, measured on the host: its VM process's CPU
// time and resident memory, and its disk overlay's allocated size.
// The node fills the measured fields; Lifecycle::usage adds the sandbox's
// shape (vCPUs, memory) and scales the CPU share to its vCPUs.
struct Usage {
  unsigned cpu_count = 1;
  // Since the previous sample (the first: since its VM started); from the
  // node 100 is one host CPU, from the lifecycle 100 is all its vCPUs.
  double cpu_used_pct = 0;
  uint64_t mem_used_bytes = 0, mem_total_bytes = 0;  // used: the VM's resident memory
  // used: what its disk overlay holds (written since its template); total: the disk's size.
  uint64_t disk_used_bytes = 0, disk_total_bytes = 0;
};

class Node {
 public:
  // Called (on the io thread) when a sandbox the node was running is lost
  // without anyone asking: its VM exited or its agent channel failed. By
  // then the node has released everything the sandbox held.
  using LostHandler = std::function<void(const std::string& tenant, const std::string& id,
                                         const std::string& reason)>;

  virtual ~Node() = default;
  virtual void onLost(LostHandler h) = 0;

  // Egress settings, before the sandbox has a VM: checked against this node
  // and the tenant's credentials, and kept for every later VM of it
  // (unset: the node's defaults).
  virtual Status prepareNetwork(const std::string& tenant, const std::string& id,
                                const std::optional<NetworkSpec>& spec) = 0;
  // A fork copy gets the settings its parent has now.
  virtual Status inheritNetwork(const std::string& parent, const std::string& child) = 0;
  // New settings for an existing sandbox: stored, and registered with the
  // gateway at once when it has a VM. Returns them as stored (an empty
  // mode becomes the node's default). Awaitable: an API replica asks the
  // sandbox's node, and the local node awaits its gateway without holding
  // the io thread.
  virtual asio::awaitable<Result<NetworkSpec>> updateNetwork(std::string tenant, std::string id,
                                                             NetworkSpec spec) = 0;
  // A sandbox's settings as stored (mode none for one that never had any).
  virtual Result<NetworkSpec> network(const std::string& id) = 0;
  // The tenant's credential `name` was created, changed or deleted: every
  // running sandbox of the tenant whose settings name it gets its policy
  // again at once (connections carrying the old value are reset). Failures
  // are the node's to log; the credential is stored either way.
  virtual asio::awaitable<void> credentialChanged(std::string tenant, std::string name) = 0;

  virtual asio::awaitable<Status> create(NodeCreate c) = 0;
  // Saves the sandbox and frees its VM. `keep_memory` false saves only its
  // disk (the guest's filesystems synced first): its resume boots the
  // template's kernel on that disk, so processes are gone and files stay.
  virtual asio::awaitable<Status> pause(std::string id, bool keep_memory) = 0;
  virtual asio::awaitable<Status> resume(std::string tenant, std::string id) = 0;
  // Copies a running sandbox into one new sandbox per id. An Error: no copy
  // exists. Otherwise one Status per copy, in order (a copy may fail alone,
  // e.g. when its network policy cannot be registered).
  virtual asio::awaitable<Result<std::vector<Status>>> fork(std::string tenant, std::string id,
                                                            std::vector<std::string> copies) = 0;
  // Snapshots a running sandbox into a new template named `stored_name`.
  virtual asio::awaitable<Result<templates::Manifest>> forkToTemplate(std::string id,
                                                                      std::string stored_name) = 0;
  // Queues a template build (minutes of a booted guest, off the io thread)
  // and answers at once, so that a refusal is the caller's to report before
  // it accepts anything: kResourceExhausted when the node's build queue is
  // full, kUnavailable when this node does not build templates. The result
  // arrives through `cb` (submit with callbacks rather than an awaitable:
  // the build outlives the request that asked for it).
  virtual Status build(BuildRequest req, BuildCallbacks cb) = 0;
  // Ends a sandbox in whatever state the node holds it (a paused one is
  // never restored to be destroyed); nothing held is not an error.
  virtual asio::awaitable<Status> destroy(std::string id) = 0;
  // Cuts short what the node is doing for `id` right now (a create, resume
  // or fork stuck on a guest that does not answer): its VM is killed, so
  // the call in flight fails promptly. Nothing happens if nothing is.
  virtual void abort(const std::string& id) = 0;

  virtual Holding holding(const std::string& id) const = 0;
  // What a running sandbox uses now; kFailedPrecondition when it has no VM.
  // Awaitable: it is measured on the sandbox's node.
  virtual asio::awaitable<Result<Usage>> usage(std::string id) = 0;
  // The agent of a running sandbox, or null.
  virtual std::shared_ptr<agentclient::AgentClient> agent(const std::string& id) = 0;

  // After a restart: takes over a sandbox an earlier process left.
  virtual asio::awaitable<Result<Holding>> adopt(std::string tenant, std::string id) = 0;
  // Removes what no sandbox in `keep` owns; returns how many leftovers went.
  virtual asio::awaitable<int> discardOrphans(std::set<std::string> keep) = 0;
  // A clean stop: running VMs are left for the next process, or stopped
  // with `stop_vms`; returns the ids of the sandboxes it stopped.
  virtual asio::awaitable<std::vector<std::string>> shutdown(bool stop_vms) = 0;
};

}  // namespace vessel::ops
