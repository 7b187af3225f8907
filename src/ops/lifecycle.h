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
#include "ops/node.h"
#include "ops/operation_log.h"
#include "ops/quota.h"
#include "ops/state_machine.h"
#include "store/store.h"
#include "templates/naming.h"
#include "templates/store.h"

namespace vessel::ops {

// Lifetimes and quotas (vesseld's flags); a tenant's own limits in the
// store win over the quota defaults.
struct Policy {
  int64_t default_idle_timeout_s = 600;
  int64_t default_lifetime_s = 24 * 3600;
  int64_t max_lifetime_s = 7 * 24 * 3600;
  QuotaDefaults quota;
  // The largest disk a create may ask for (MiB).
  uint64_t max_disk_mib = 64 * 1024;
  // Creates, pauses and forks are refused while the filesystem holding
  // state_dir has less than this free (MiB; 0 or no dir: never).
  std::string state_dir;
  uint64_t min_free_disk_mib = 0;
  std::chrono::milliseconds reap_interval{1000};
};

struct CreateRequest {
  std::string tenant;
  std::string template_name = "minimal";  // as the tenant names it
  std::optional<unsigned> vcpus;
  std::optional<uint64_t> memory_mib;
  // The root disk (MiB): at least the template image's, at most
  // Policy::max_disk_mib; unset: the template's default.
  std::optional<uint64_t> disk_mib;
  std::vector<std::string> env;        // KEY=VALUE
  std::string metadata_json = "{}";    // an object of strings, checked at the edge
  std::optional<NetworkSpec> network;  // unset: the node's defaults
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
};

// A credential as a front end checked it: `hosts` are normalized exact
// names (at most 16), `header` a field the gateway may set, `value` the
// secret it sets.
struct CredentialSpec {
  std::string name;
  std::vector<std::string> hosts;
  std::string header, value;
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
bool metadataMatches(const std::string& metadata_json,
                     const std::map<std::string, std::string>& want);

class Lifecycle {
 public:
  Lifecycle(asio::io_context& io, store::Store& store, Node& node,
            templates::TemplateStore& templates, const WallClock& clock = systemWallClock());
  ~Lifecycle();
  Lifecycle(const Lifecycle&) = delete;
  Lifecycle& operator=(const Lifecycle&) = delete;

  void setPolicy(const Policy& p) { policy_ = p; }
  const Policy& policy() const { return policy_; }
  // Operation latencies, expiries and sandboxes by state go to `r`.
  void setMetrics(metrics::Registry& r);
  OperationLog& operations() { return log_; }
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
  // timeout and expiry (a copy never outlives its parent's lifetime).
  Result<Accepted> fork(const std::string& tenant, const std::string& id, int count);
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
  // New egress settings for a sandbox in any live state: stored, and live at
  // once for a running one (its open connections the new policy refuses are
  // reset). kNotFound for an unknown sandbox, kInvalidArgument for settings
  // this node cannot give (a missing credential, egress off). Returns the
  // settings as stored (an empty mode is the node's default).
  asio::awaitable<Result<NetworkSpec>> setNetwork(std::string tenant, std::string id,
                                                  NetworkSpec spec);
  // The tenant's sandbox's egress settings as stored.
  Result<NetworkSpec> network(const std::string& tenant, const std::string& id);
  // The tenant's credentials (the gateway injects them; values are never
  // read back by a front end). A put replaces one of the same name; a put
  // or delete reaches running sandboxes that use it at once.
  asio::awaitable<Result<store::CredentialRecord>> putCredential(std::string tenant,
                                                                 CredentialSpec c);
  Result<std::vector<store::CredentialRecord>> listCredentials(const std::string& tenant);
  // kNotFound when the tenant has no credential of that name.
  asio::awaitable<Status> deleteCredential(std::string tenant, std::string name);
  // What front ends keep beside a sandbox and show (lifecycle_frontend.cc),
  // so that they read and write it through the lifecycle, never the store:
  // the egress settings as the sandbox was given them (their stored JSON;
  // "" when it never was), a front end's ingress settings (JSON it owns,
  // E2B's public traffic and Host mask), a credential by name.
  Result<std::string> givenNetwork(const std::string& id);
  Result<std::string> ingress(const std::string& id);
  Status setIngress(const std::string& id, const std::string& json);
  Result<std::optional<store::CredentialRecord>> credential(const std::string& tenant,
                                                            const std::string& name);
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

  // Templates as a tenant names them: its own first, else a built-in one.
  Result<std::string> resolveTemplate(const std::string& tenant, const std::string& name);
  // Refuses a name a new template cannot have (reserved, built in).
  Status checkNewTemplateName(const std::string& name);
  // Deletes template versions nothing holds and a newer one replaces.
  void collectTemplates();
  // Builds the tenant's template `spec.name` on the node from `spec` (its
  // base as the tenant names it). The operation (kind "build", no sandbox)
  // publishes template.progress events, then template.built and is done;
  // or it fails with the node's reason, in the tenant's names. A refusal
  // (a reserved name, no such base, the node's build queue full) is an
  // Error before anything is accepted, or the failed operation once begun.
  Result<store::OperationRecord> buildTemplate(const std::string& tenant,
                                               templates::BuildSpec spec);

  // The reaper: every reap_interval, reapOnce(). Stopped by shutdown().
  void startReaper();
  // Deletes sandboxes past their lifetime, or running and idle past their
  // timeout (at the clock's now), each after a sandbox.expired event.
  // Returns how many it started deleting.
  int reapOnce();

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
  // The reaper's answer to a timeout of a sandbox created with
  // pause_on_timeout: paused, kept until the cap.
  Status pauseOnTimeout(const store::SandboxRecord& sb, const std::string& why);
  std::optional<Error> quotaFor(const std::string& tenant, const Demand& d);
  // Policy::min_free_disk_mib on the state dir, before `what` writes to it.
  Status checkStateDisk(std::string_view what) const;
  // The same check for the store to make with one sandbox's insert.
  store::Store::Admission admission(const std::string& tenant, const Demand& d) const;
  void setSandbox(const store::OperationRecord& op, SandboxState state,
                  const std::string& error = "") {
    log_.setSandbox(op.tenant_id, op.id, op.sandbox_id, state, error);
  }

  asio::awaitable<void> runCreate(store::OperationRecord op, NodeCreate c);
  asio::awaitable<void> runAction(store::OperationRecord op, Transition t, bool keep_memory);
  asio::awaitable<void> runDelete(store::OperationRecord op);
  asio::awaitable<void> runFork(store::OperationRecord op, std::vector<std::string> ids);
  asio::awaitable<void> runForkToTemplate(store::OperationRecord op, std::string name);
  void buildProgress(const std::string& op_id, const std::string& name, const std::string& step,
                     int percent);
  void buildDone(const std::string& op_id, const std::string& name, Result<templates::Manifest> r);
  void failBuildsInFlight();
  // An operation other than delete ends: if a delete came meanwhile, it
  // goes on now (and this operation is recorded as cancelled).
  bool handOverToDelete(store::OperationRecord& op, const Error* error);
  void onLost(const std::string& tenant, const std::string& id, const std::string& reason);
  asio::awaitable<void> reapLoop();
  asio::awaitable<bool> recoverSandbox(store::SandboxRecord sb,
                                       std::vector<store::OperationRecord> ops,
                                       std::set<std::string>& keep);

  asio::io_context& io_;
  store::Store& store_;
  Node& node_;
  templates::TemplateStore& templates_;
  const WallClock& clock_;
  OperationLog log_;
  Policy policy_;
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
  std::shared_ptr<asio::steady_timer> reap_timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  metrics::Family<metrics::Counter>* reaped_ = nullptr;
  metrics::Family<metrics::Counter>* lost_ = nullptr;
};

}  // namespace vessel::ops
