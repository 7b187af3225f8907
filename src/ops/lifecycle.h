#pragma once
// The sandbox lifecycle as a service: every front end (the public API, the
// E2B-compatible API, the CLI through them) calls this, with typed requests
// and typed answers; nothing here knows HTTP or a request's JSON. It owns
// the sandboxes' stored state and their operations, reaches the VMs only
// through ops::Node, and supervises them: a sandbox whose VM is lost
// becomes `failed` with the reason.
//
// Every change is an operation, stored (pending) before the call returns
// and run afterwards on the io thread; awaitOperation() lets a front end
// answer synchronously. Every query is scoped to the calling tenant: another
// tenant's sandbox is as absent as one that never existed (kNotFound).
// Used from one io thread.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "metrics/registry.h"
#include "ops/egress_settings.h"
#include "ops/node.h"
#include "ops/operation_log.h"
#include "ops/policy.h"
#include "ops/quota.h"
#include "ops/reaper.h"
#include "ops/sandbox_log.h"
#include "ops/state_machine.h"
#include "ops/template_catalogue.h"
#include "ops/volume_keeper.h"
#include "ops/volume_mounter.h"
#include "store/store.h"
#include "templates/naming.h"
#include "templates/store.h"

namespace vessel::ops {

struct CreateRequest {
  std::string tenant;
  std::string template_name = "minimal";  // as the tenant names it
  std::optional<unsigned> vcpus;
  std::optional<uint64_t> memory_mib;
  // The root disk (MiB): at least the template image's, at most
  // Policy::max_disk_mib; unset: the template's default.
  std::optional<uint64_t> disk_mib;
  std::vector<std::string> env;                 // KEY=VALUE
  std::map<std::string, std::string> metadata;  // labels, checked at the edge
  std::optional<NetworkSpec> network;           // unset: the node's defaults
  // Its ports' ingress settings, stored with the sandbox in one transaction
  // and kept by its forks; unset: none (the front end's default applies).
  std::optional<IngressSpec> ingress;
  bool cold = false;
  // Seconds: idle timeout (0: never) and hard lifetime; unset: the defaults.
  std::optional<int64_t> timeout_s, lifetime_s;
  // What the timeout (idle or lifetime) does: delete it (the default), or
  // pause it, with its memory or (pause_memory false) only its disk; a
  // paused one then waits for a resume until the deployment's cap.
  // auto_resume: traffic to it resumes it (wake()); needs a pause with
  // memory, since a disk-only pause boots again and the request that woke
  // it would find none of its processes.
  bool pause_on_timeout = false;
  bool pause_memory = true;
  bool auto_resume = false;
  // The tenant's volumes to mount once it runs, by name (volume_id is
  // filled by create()); checked at the edge (paths, count).
  std::vector<VolumeAttachment> volumes;
};

// A lifecycle change accepted: the sandbox as stored now and its operation
// (pending or running); a fork names its copies, a fork into a template
// the template's name.
struct Accepted {
  store::SandboxRecord sandbox;
  store::OperationRecord operation;
  std::vector<store::SandboxRecord> copies;
};

struct ListRequest {
  std::string tenant;
  int page_size = 50;
  std::string page_token;                       // the last id of the previous page
  std::map<std::string, std::string> metadata;  // every pair must match
  std::optional<SandboxState> state;            // only sandboxes in this state
  std::set<SandboxState> states;                // only sandboxes in one of these (empty: any)
  std::optional<int64_t> created_after_ms;      // only those created at or after this
  std::string template_name;                    // only those of this template ("" any)
  // By id (the default), or by creation (then id), newest or oldest first:
  // E2B lists by start time. Every matching sandbox is read to sort them by
  // creation, which is fine for a tenant's sandboxes (bounded by its quota).
  enum class Order { kById, kNewestFirst, kOldestFirst };
  Order order = Order::kById;
};
struct Page {
  std::vector<store::SandboxRecord> sandboxes;
  std::string next_page_token;  // "" on the last page
};

// Whether a sandbox's stored metadata has every pair of `want`.
bool metadataMatches(const std::map<std::string, std::string>& have,
                     const std::map<std::string, std::string>& want);

class Lifecycle {
 public:
  Lifecycle(asio::io_context& io, store::Store& store, Node& node,
            templates::TemplateStore& templates, const WallClock& clock = systemWallClock());
  ~Lifecycle();
  Lifecycle(const Lifecycle&) = delete;
  Lifecycle& operator=(const Lifecycle&) = delete;

  void setPolicy(const Policy& p) {
    policy_ = p;
    sandbox_log_.setLimits({p.log_max_entries, std::chrono::seconds(p.log_retention_s)});
  }
  const Policy& policy() const { return policy_; }
  // Operation latencies, expiries and sandboxes by state go to `r`.
  void setMetrics(metrics::Registry& r);
  OperationLog& operations() { return log_; }
  // Where sandboxes' volumes are mounted (ops/volume_mounter.h); unset: a
  // create naming volumes is refused (kUnavailable), as on an API replica.
  void setVolumeMounter(VolumeMounter* m) { mounter_ = m; }
  // Where volumes' images are (ops/volume_keeper.h), for the clones a fork
  // makes, within the tenant's `tenant_max_mib` of volumes; unset: a fork
  // asking for clones is refused (kUnavailable).
  void setVolumeKeeper(VolumeKeeper* k, int64_t tenant_max_mib) {
    keeper_ = k;
    volume_quota_mib_ = tenant_max_mib;
  }
  // Each sandbox's log (ops/sandbox_log.h): its lifecycle is written here;
  // front ends read it, and the command log writes to it.
  SandboxLog& sandboxLog() { return sandbox_log_; }
  // The tenant's sandbox's log entries (kNotFound for a sandbox it does
  // not have, deleted ones included while their log is kept).
  Result<std::vector<store::LogRecord>> readLog(const std::string& tenant, const std::string& id,
                                                const store::LogQuery& q);
  const WallClock& clock() const { return clock_; }

  Result<Accepted> create(const CreateRequest& req);
  // `keep_memory` false keeps only the sandbox's disk: its resume boots
  // the template's kernel on that disk (processes are gone, files stay).
  Result<Accepted> pause(const std::string& tenant, const std::string& id, bool keep_memory = true);
  Result<Accepted> resume(const std::string& tenant, const std::string& id);
  // Accepted in every state but deleting and deleted: an operation in
  // flight is cut short (the node aborts it) and the sandbox is destroyed
  // without being restored first.
  Result<Accepted> remove(const std::string& tenant, const std::string& id);
  // `count` copies of a running sandbox; each keeps its parent's idle
  // timeout and expiry (a copy never outlives its parent's lifetime), and
  // mounts its parent's volumes, or (`clone_volumes`) a clone of each
  // made while the parent is quiet, named <volume>-<copy id>.
  Result<Accepted> fork(const std::string& tenant, const std::string& id, int count,
                        bool clone_volumes = false);
  // Snapshots a running sandbox into the tenant's template `name`.
  Result<Accepted> forkToTemplate(const std::string& tenant, const std::string& id,
                                  const std::string& name);
  // A new idle timeout and/or a lifetime counted from now, never past
  // creation + the maximum lifetime.
  Result<store::SandboxRecord> extend(const std::string& tenant, const std::string& id,
                                      std::optional<int64_t> timeout_s,
                                      std::optional<int64_t> lifetime_s);
  // E2B's "timeout only ever extended" (connect to a running sandbox): the
  // lifetime becomes now + lifetime_s if that is later than it is, up to
  // creation + the maximum lifetime (clamped, not refused); never shorter.
  Result<store::SandboxRecord> extendAtLeast(const std::string& tenant, const std::string& id,
                                             int64_t lifetime_s);
  // A sandbox's egress settings and its tenant's credentials
  // (ops/egress_settings.h).
  EgressSettings& egress() { return egress_; }
  // What front ends show of a sandbox beside its record
  // (lifecycle_frontend.cc), read through the lifecycle, never the store:
  // its ports' ingress settings (nullopt: its create gave none; an Error,
  // e.g. kNotFound, is the caller's to treat as private ports).
  Result<std::optional<IngressSpec>> ingress(const std::string& id);
  // A live (not deleted) sandbox by id, whatever its tenant: the sandbox
  // ports' ingress, which knows only the id from the Host.
  Result<std::optional<store::SandboxRecord>> liveSandbox(const std::string& id);
  // What the tenant's running sandbox uses now (ops::Usage); a sandbox
  // without a VM (paused, creating) is kFailedPrecondition.
  asio::awaitable<Result<Usage>> usage(std::string tenant, std::string id);
  Result<store::SandboxRecord> get(const std::string& tenant, const std::string& id);
  // Auto-resume: something (the sandbox ports' ingress) has traffic for
  // sandbox `id`, whatever its tenant (the caller routes by id). Running:
  // ok at once. Paused and created with auto_resume: resumed (a resume or
  // pause already in flight is awaited first, two wakes share one resume)
  // and ok once running, its lifetime started again. Otherwise an Error:
  // kNotFound (no such sandbox, deleted), kFailedPrecondition (paused
  // without auto-resume, failed, being deleted), kDeadlineExceeded, or the
  // resume's failure.
  asio::awaitable<Status> wake(std::string id, std::chrono::steady_clock::time_point deadline);
  // The tenant's sandbox once no pause or resume is in flight for it (one
  // that is pausing or resuming is awaited, up to `deadline`), as stored
  // then: a front end deciding what to do next (E2B's connect) sees where
  // it landed. kDeadlineExceeded if it is still on its way.
  asio::awaitable<Result<store::SandboxRecord>> settled(
      std::string tenant, std::string id, std::chrono::steady_clock::time_point deadline);
  Result<Page> list(const ListRequest& req);
  Result<store::OperationRecord> getOperation(const std::string& tenant, const std::string& id);
  // The operation once done or failed; kDeadlineExceeded if still going.
  asio::awaitable<Result<store::OperationRecord>> awaitOperation(
      std::string tenant, std::string id, std::chrono::steady_clock::time_point deadline);

  // Something used the sandbox (a command, a file, an API action): its idle
  // clock starts again.
  void noteActivity(const std::string& id);
  // The agent of a running sandbox (for the data planes), noting activity;
  // null while it pauses.
  std::shared_ptr<agentclient::AgentClient> agentOf(const std::string& id);

  // Templates as a tenant names them (ops/template_catalogue.h): its own
  // first, else a built-in one; new names checked; old versions collected.
  const TemplateCatalogue& templateCatalogue() const { return catalogue_; }
  // Deletes the tenant's template `name`, every version; sandboxes made
  // from it run on (TemplateCatalogue::remove).
  Status deleteTemplate(const std::string& tenant, const std::string& name) {
    return catalogue_.remove(tenant, name);
  }
  // Builds the tenant's template `spec.name` on the node from `spec` (its
  // base as the tenant names it). The operation (kind "build", no sandbox)
  // publishes template.progress events, then template.built and is done;
  // or it fails with the node's reason, in the tenant's names. A refusal
  // (a reserved name, no such base, the node's build queue full) is an
  // Error before anything is accepted, or the failed operation once begun.
  // `given`: a registry username and password that came with the request
  // itself (E2B's fromImageRegistry) instead of a stored credential; used
  // for this build's pull only, never stored or logged.
  Result<store::OperationRecord> buildTemplate(const std::string& tenant, templates::BuildSpec spec,
                                               templates::RegistryAuth given = {});

  // The reaper (ops/reaper.h): start() runs reapOnce() every
  // reap_interval (deletes sandboxes past their lifetime, pauses or ends
  // idle ones past their timeout); stopped by shutdown().
  Reaper& reaper() { return reaper_; }

  // Before serving, after a restart: takes over every sandbox the store
  // says is alive (ops/recovery.h decides each) and ends or reruns every
  // unfinished operation; nothing stays pending. Returns how many
  // sandboxes were taken over.
  asio::awaitable<int> recover();
  // Several API replicas: the unfinished operations of a replica that died
  // (claimed from the store by this one) are settled as a restart settles
  // them: each sandbox's node is asked what it holds, and each operation
  // ends (done or failed) or runs again here.
  asio::awaitable<void> takeOver(std::vector<store::OperationRecord> ops);
  // A clean stop: the node keeps running VMs for the next process unless
  // `stop_vms` (then they are recorded as failed).
  asio::awaitable<void> shutdown(bool stop_vms = false);

 private:
  // The tenant's sandbox `id` and the transition `action` takes it through.
  struct Legal {
    store::SandboxRecord sandbox;
    Transition transition;
  };
  Result<Legal> checkAction(const std::string& tenant, const std::string& id, Action action);
  Result<Page> listByCreation(const ListRequest& req);
  // `on_timeout`: a pause the reaper starts (see timeout_pauses_).
  Result<Accepted> startAction(const std::string& tenant, const std::string& id, Action action,
                               bool keep_memory = true, bool on_timeout = false);
  std::optional<Error> quotaFor(const std::string& tenant, const Demand& d);
  // Policy::min_free_disk_mib on the state dir, before `what` writes to it.
  Status checkStateDisk(std::string_view what) const;
  // The same check for the store to make with one sandbox's insert.
  store::Store::Admission admission(const std::string& tenant, const Demand& d) const;
  void setSandbox(const store::OperationRecord& op, SandboxState state,
                  const std::string& error = "") {
    log_.setSandbox(op.tenant_id, op.id, op.sandbox_id, state, error);
  }

  asio::awaitable<void> runCreate(store::OperationRecord op, NodeCreate c,
                                  std::vector<VolumeAttachment> volumes);
  // Volumes (lifecycle_volumes.cc): the request's names as the tenant's
  // volumes, or kNotFound / kInvalidArgument / kUnavailable.
  Result<std::vector<VolumeAttachment>> resolveVolumes(const CreateRequest& in);
  Status recordVolumes(const std::string& id, const std::vector<VolumeAttachment>& v);
  // A template made from sandbox `id` expects the volumes it mounts (by
  // name, at the same paths): creates from it naming none mount them.
  Status recordTemplateVolumes(const std::string& tenant, const std::string& id,
                               const std::string& template_name);
  // A fork's copy mounts what its parent mounts, at the same paths.
  Status inheritVolumes(const std::string& parent, const std::string& copy);
  // ... or a clone of each: the clones' records (quota counted) and the
  // copy's rows naming them; their images are made by makeClones.
  struct VolumeClone {
    store::VolumeRecord from, to;
  };
  Status cloneVolumes(const std::string& tenant, const std::string& parent, const std::string& copy,
                      std::vector<VolumeClone>& clones);
  asio::awaitable<Status> makeClones(std::vector<VolumeClone> clones);
  // A fork refused or failed: the clones' records (and any image) go.
  void dropClones(const std::vector<VolumeClone>& clones);
  // Mounts them in the running sandbox; on an Error its VM is destroyed.
  asio::awaitable<Status> mountVolumes(std::string id, std::vector<VolumeAttachment> v);
  // Its servers stop and its volume_mounts rows go (deleted or failed).
  void releaseVolumes(const std::string& id);
  // Around a save of its memory (pause, fork): its mounts quiet (`hold`:
  // their servers kept for the resume), then (the VM runs on) not.
  asio::awaitable<void> quiesceVolumes(std::string id, bool hold);
  asio::awaitable<void> unquiesceVolumes(std::string id);
  // Its VM runs again (resumed, a fork's copy, taken over at a restart):
  // its recorded mounts carried on or mounted anew. A mount that fails is
  // logged; the sandbox runs on without it.
  asio::awaitable<void> remountVolumes(std::string id);
  asio::awaitable<void> runAction(store::OperationRecord op, Transition t, bool keep_memory);
  asio::awaitable<void> runDelete(store::OperationRecord op);
  asio::awaitable<void> runFork(store::OperationRecord op, std::vector<std::string> ids);
  asio::awaitable<void> runForkToTemplate(store::OperationRecord op, std::string name);
  Result<templates::RegistryAuth> registryAuth(const std::string& tenant,
                                               const templates::BuildSpec& spec);
  void buildProgress(const std::string& op_id, const std::string& name, const std::string& step,
                     int percent);
  void buildLog(const std::string& op_id, const std::string& name,
                const templates::BuildLogEntry& e);
  void buildDone(const std::string& op_id, const std::string& name, Result<templates::Manifest> r);
  void failBuildsInFlight();
  // An operation other than delete ends: if a delete came meanwhile, it
  // goes on now (and this operation is recorded as cancelled).
  bool handOverToDelete(store::OperationRecord& op, const Error* error);
  void onLost(const std::string& tenant, const std::string& id, const std::string& reason);
  asio::awaitable<bool> recoverSandbox(store::SandboxRecord sb,
                                       std::vector<store::OperationRecord> ops,
                                       std::set<std::string>& keep);

  asio::io_context& io_;
  store::Store& store_;
  Node& node_;
  templates::TemplateStore& templates_;
  const WallClock& clock_;
  SandboxLog sandbox_log_;  // before log_, which writes to it
  OperationLog log_;
  Policy policy_;
  TemplateCatalogue catalogue_;
  EgressSettings egress_;
  // After log_ and policy_, which it reads; asks this for deletes and pauses.
  Reaper reaper_;
  // Sandboxes with an operation other than a delete in flight -> a delete
  // waiting for it to end (nullopt: none asked for).
  std::map<std::string, std::optional<store::OperationRecord>> busy_;
  // Pauses and resumes in flight by sandbox id (wake() awaits them).
  std::map<std::string, store::OperationRecord> actions_;
  // Pauses the reaper started for a timeout (operation ids): one that fails
  // with the sandbox still running ends it as a timeout would have.
  std::set<std::string> timeout_pauses_;
  // Template builds the node is running: op id -> their operation. Failed
  // at shutdown (the node drops them without calling back).
  std::map<std::string, store::OperationRecord> builds_in_flight_;
  // Their build VMs, op id -> shape: a build is a sandbox in its tenant's
  // quotas while it runs (withBuilds).
  std::map<std::string, Demand> build_shapes_;
  // `u` with the tenant's builds in flight: one sandbox each, their VMs'
  // memory and vCPUs.
  store::TenantUsage withBuilds(const std::string& tenant, store::TenantUsage u) const;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  metrics::Family<metrics::Counter>* lost_ = nullptr;
  VolumeMounter* mounter_ = nullptr;
  VolumeKeeper* keeper_ = nullptr;
  int64_t volume_quota_mib_ = -1;
  // A fork's clones to make before its save, by operation id.
  std::map<std::string, std::vector<VolumeClone>> fork_clones_;
};

}  // namespace vessel::ops
