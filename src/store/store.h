#pragma once
// The durable store behind vesseld. One interface, two engines: SQLite
// (embedded, single node, the default) and PostgreSQL (many machines).
// Schema changes are numbered migrations applied in order at open.
//
// Every query about a tenant's objects takes the tenant id: isolation is
// enforced here, in the WHERE clause, not by callers remembering to check.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "store/settings.h"
#include "store/states.h"

namespace vessel::store {

struct SandboxRecord {
  std::string id, tenant_id, template_name;
  SandboxState state = SandboxState::kCreating;
  std::string error;  // why it failed, when it did
  unsigned vcpus = 1;
  uint64_t memory_mib = 256;
  uint64_t disk_mib = 0;  // its root disk (0: a record from before disk sizes)
  std::map<std::string, std::string> metadata;  // a front end's labels
  int64_t created_ms = 0, updated_ms = 0;
  // Lifetime: ended after idle_timeout_s without activity while running
  // (0: never), and at expires_ms whatever its state (0: never).
  int64_t idle_timeout_s = 0, expires_ms = 0, last_active_ms = 0;
  std::string node;  // the node it runs on (vesseld --role=node); "" on a single machine
  // What its timeout (idle or lifetime) does: delete it, or pause it
  // (keeping its memory unless !pause_memory: then only its disk, and a
  // resume boots it again). auto_resume: traffic to its ports resumes a
  // paused one (Lifecycle::wake). lifetime_s: the lifetime it was created
  // with, which such a resume starts again (0: unknown, the default's).
  bool pause_on_timeout = false;
  bool pause_memory = true;
  bool auto_resume = false;
  int64_t lifetime_s = 0;
  // Its ports' ingress settings, written in the transaction that inserts
  // the record (a fork's copies carry their parent's); unset: its create
  // gave none (the front end's default applies). Settings stored but
  // unreadable read as private ports with the Host as sent: ports fail
  // closed.
  std::optional<IngressSettings> ingress;
};

struct OperationRecord {
  std::string id, tenant_id, sandbox_id, kind;
  OpState state = OpState::kPending;
  std::string error_code, error_message;
  int64_t created_ms = 0, updated_ms = 0;
  std::string owner;  // the API replica running it ("" on a single machine)
};

// A node of a cluster (vesseld --role=node) as it last reported itself.
struct NodeRecord {
  std::string name;
  std::string advertise_url;  // its node API, as API replicas reach it
  std::string data_url;       // its data plane, as clients reach it
  std::string envd_url;       // its E2B envd listener, as API replicas reach it ("" for none)
  uint64_t memory_mib = 0, memory_free_mib = 0;  // guest memory it may give, and free of that
  unsigned vcpus = 0;
  int64_t sandboxes = 0;               // VMs it holds
  std::vector<std::string> templates;  // stored names of the templates it has
  std::string accel;                   // kvm | tcg
  // MiB free where it keeps volume images (migration 18); 0: it keeps no
  // volumes (it cannot mount them in sandboxes), none is placed there.
  uint64_t volume_free_mib = 0;
  bool lost = false;  // an API replica found its heartbeat too old; the next heartbeat clears it
  int64_t registered_ms = 0, heartbeat_ms = 0;
};

// A template version in the cluster's catalogue (store migration 9): its
// manifest as JSON (templates::toJson: machine shape, defaults, every
// file's sha256) and its files' sizes, registered by a node that has it.
struct TemplateRecord {
  std::string name, version;  // the stored name (t-<hex>-<name> for a tenant's)
  std::string tenant_id;      // its owner; "" for a built-in template
  std::string manifest_json;
  std::string sizes_json = "{}";  // {"file": bytes}
  std::string created_at;         // the manifest's (RFC 3339): the newest version wins
  int64_t registered_ms = 0;
  bool deleted = false;
};

// A volume (store migration 16, docs/volumes.md): a named filesystem a
// tenant owns, of at most size_mib, whose image lives on `node`.
struct VolumeRecord {
  std::string id, tenant_id, name;
  uint64_t size_mib = 0;
  bool read_only = false;  // a snapshot
  std::string source_id;   // the volume a snapshot or clone was copied from ("" for none)
  std::string node;        // the node holding its image ("" on one machine)
  int64_t created_ms = 0;
};
// A volume a tenant's template expects at `path`, by the volume's name.
struct TemplateVolumeRecord {
  std::string tenant_id, template_name, name, path;
  bool read_only = false;
};
// A volume mounted into a sandbox at `path` (filled at sandbox create).
struct VolumeMountRecord {
  std::string sandbox_id, volume_id, path;
  bool read_only = false;
};

// Per-tenant limits; unset: the deployment's default.
struct TenantLimits {
  std::optional<int64_t> max_sandboxes, max_memory_mib, max_vcpus, max_disk_mib;
};
// What counts against them: sandboxes not deleted or failed; the memory
// and vCPUs of those holding a VM (not paused); and on the node's disk,
// every live sandbox's disk size (fork copies are sandboxes too) plus each
// paused one's memory (its pause snapshot). The tenant's templates are
// not in the store: the lifecycle adds them.
struct TenantUsage {
  int64_t sandboxes = 0, memory_mib = 0, vcpus = 0, disk_mib = 0;
};

// A secret the egress gateway injects as a header for `hosts` (docs/gateway.md).
struct CredentialRecord {
  std::string tenant_id, name;
  std::vector<std::string> hosts;  // exact host names (none: an E2B secret, any host)
  std::string header;              // e.g. "Authorization"
  std::string value;               // the secret header value; never returned by the API
  int64_t created_ms = 0;
};

struct EventRecord {
  int64_t seq = 0;  // global, increasing: the SSE event id
  std::string tenant_id, operation_id, sandbox_id, type;
  std::string data_json = "{}";
  int64_t at_ms = 0;
};

// An entry of a sandbox's log (store migration 12, docs/logs.md): a kind
// ("lifecycle", "command", ...) and a small JSON object of that kind's
// fields. Never data, never a secret: writers (ops/sandbox_log.h) decide.
struct LogRecord {
  int64_t seq = 0;  // global, increasing: the order, and the SSE event id
  std::string sandbox_id, kind;
  std::string data_json = "{}";
  int64_t at_ms = 0;
};
// Which entries of a sandbox's log a read returns: of `kind` ("" any), at
// or after since_ms, at or before until_ms (0: no bound), after after_seq,
// oldest first unless newest_first, at most `limit`.
struct LogQuery {
  std::string kind;
  int64_t since_ms = 0, until_ms = 0, after_seq = 0;
  bool newest_first = false;
  int limit = 1000;
};

// A data-plane session: a short-lived bearer token (only its SHA-256 is
// stored) that reaches one sandbox of one tenant.
struct SessionRecord {
  std::string token_sha256, tenant_id, sandbox_id;
  int64_t created_ms = 0, expires_ms = 0;
};

class Store {
 public:
  virtual ~Store() = default;
  virtual std::string_view engine() const = 0;
  virtual int schemaVersion() const = 0;
  // Small key/value facts about this deployment (instance id, ...).
  virtual Result<std::optional<std::string>> getMeta(const std::string& key) = 0;
  virtual Status setMeta(const std::string& key, const std::string& value) = 0;
  // Sets `key` to `value` unless it has a value already, and returns the
  // value it has then: of several processes racing, all get the first's.
  virtual Result<std::string> getOrSetMeta(const std::string& key, const std::string& value) = 0;

  // Tenants and their API keys (only the SHA-256 of a key is stored).
  virtual Status createTenant(const std::string& id, const std::string& name) = 0;
  virtual Result<int64_t> countTenants() = 0;
  virtual Status addApiKey(const std::string& tenant_id, const std::string& key_sha256) = 0;
  virtual Result<std::optional<std::string>> tenantForKey(const std::string& key_sha256) = 0;

  // Inserts the record and its ingress settings (when set) in one
  // transaction: both or nothing.
  virtual Status insertSandbox(const SandboxRecord& s) = 0;
  // Inserts `s` only if `admit`, shown its tenant's limits and usage (what
  // tenantLimits and tenantUsage answer), returns no Error; else that
  // Error. The check and the insert are one transaction, serialized per
  // tenant (PostgreSQL: the tenant's row lock; SQLite: the write lock), so
  // several writers (API replicas) cannot all take a tenant's last slot.
  // `admit` runs inside the store and must not call it.
  using Admission =
      std::function<std::optional<Error>(const TenantLimits& limits, const TenantUsage& use)>;
  virtual Status insertSandboxAdmitted(const SandboxRecord& s, const Admission& admit) = 0;
  virtual Status setSandboxState(const std::string& id, SandboxState state,
                                 const std::string& error) = 0;
  virtual Result<std::optional<SandboxRecord>> getSandbox(const std::string& tenant_id,
                                                          const std::string& id) = 0;
  // A sandbox of any tenant, for callers that route by id alone and check
  // nothing of the tenant's (an ingress waking it, Lifecycle::wake).
  virtual Result<std::optional<SandboxRecord>> findSandbox(const std::string& id) = 0;
  // Sandboxes of a tenant ordered by id, those after `after_id`, at most `limit`.
  virtual Result<std::vector<SandboxRecord>> listSandboxes(const std::string& tenant_id,
                                                           const std::string& after_id,
                                                           int limit) = 0;

  virtual Status insertOperation(const OperationRecord& o) = 0;
  // Refused (kFailedPrecondition) once the operation has finished: when two
  // writers race to end it, the first one's outcome stays.
  virtual Status setOperationState(const std::string& id, OpState state,
                                   const std::string& error_code,
                                   const std::string& error_message) = 0;
  virtual Result<std::optional<OperationRecord>> getOperation(const std::string& tenant_id,
                                                              const std::string& id) = 0;

  // Appends an event and returns its sequence number.
  virtual Result<int64_t> appendEvent(const EventRecord& e) = 0;
  // A tenant's events after `after_seq`, oldest first; only one operation's
  // when `operation_id` is not empty.
  virtual Result<std::vector<EventRecord>> listEvents(const std::string& tenant_id,
                                                      const std::string& operation_id,
                                                      int64_t after_seq, int limit) = 0;

  virtual Status setTenantLimits(const std::string& tenant_id, const TenantLimits& l) = 0;
  virtual Result<TenantLimits> tenantLimits(const std::string& tenant_id) = 0;
  virtual Result<TenantUsage> tenantUsage(const std::string& tenant_id) = 0;

  // Lifetimes: a new idle timeout and hard deadline, and activity.
  virtual Status setSandboxLifetime(const std::string& id, int64_t idle_timeout_s,
                                    int64_t expires_ms) = 0;
  virtual Status touchSandbox(const std::string& id, int64_t at_ms) = 0;
  // Sandboxes of every tenant past their hard deadline (any state but
  // deleted), or running and idle past their timeout, at `now_ms`.
  virtual Result<std::vector<SandboxRecord>> listExpired(int64_t now_ms, int limit) = 0;

  // Recovery after a restart: sandboxes of every tenant that are neither
  // deleted nor failed, and operations still pending or running.
  virtual Result<std::vector<SandboxRecord>> listLiveSandboxes() = 0;
  virtual Result<std::vector<OperationRecord>> listUnfinishedOperations() = 0;
  // Metrics: how many sandboxes are in each state, every tenant together.
  virtual Result<std::vector<std::pair<SandboxState, int64_t>>> countSandboxesByState() = 0;

  // Data-plane sessions. A token's session is returned even when expired, so
  // the caller can say so; it is gone once revoked.
  virtual Status insertSession(const SessionRecord& s) = 0;
  virtual Result<std::optional<SessionRecord>> sessionForToken(const std::string& token_sha256) = 0;
  // Revokes every session of a sandbox (it ended); returns how many.
  virtual Result<int> revokeSessions(const std::string& sandbox_id) = 0;
  // Forgets sessions that expired before `now_ms`; returns how many.
  virtual Result<int> deleteExpiredSessions(int64_t now_ms) = 0;

  // Egress: credentials by (tenant, name), replaced on a second put.
  // Their values are sealed at rest (base/aead.h) under a key that only the
  // API replicas hold (vesseld --credential-key-file): without it a
  // credential can be neither put nor read (kFailedPrecondition), so a
  // node, which has none, reads its sandboxes' credentials only as the
  // replicas sealed them for it (sandboxCredential). useCredentialKey seals
  // any value stored plain before it (a store from before issue 24) and
  // returns how many.
  virtual Result<int> useCredentialKey(std::string key) = 0;
  virtual Status putCredential(const CredentialRecord& c) = 0;
  virtual Result<std::vector<CredentialRecord>> listCredentials(const std::string& tenant_id) = 0;
  virtual Result<std::optional<CredentialRecord>> getCredential(const std::string& tenant_id,
                                                                const std::string& name) = 0;
  virtual Status deleteCredential(const std::string& tenant_id, const std::string& name) = 0;
  // A sandbox's credentials as an API replica sealed them for the node that
  // runs it (cluster/credential_share.h), by name; a set replaces them all.
  // A node's store role reads only those of live sandboxes placed on it.
  virtual Status setSandboxCredentials(const std::string& sandbox_id,
                                       const std::map<std::string, std::string>& sealed) = 0;
  virtual Result<std::optional<std::string>> sandboxCredential(const std::string& sandbox_id,
                                                               const std::string& name) = 0;
  // A sandbox's network settings as its node stored them (its create's or
  // its parent's; nullopt when it has none stored). Stored JSON that does
  // not decode is kInternal.
  virtual Status setSandboxNetwork(const std::string& sandbox_id, const NetworkSettings& n) = 0;
  virtual Result<std::optional<NetworkSettings>> getSandboxNetwork(
      const std::string& sandbox_id) = 0;

  // Many machines. A node's heartbeat: registers it or updates its
  // capacity, heartbeat_ms (the store's now) and clears `lost`.
  virtual Status heartbeatNode(const NodeRecord& n) = 0;
  virtual Result<std::vector<NodeRecord>> listNodes() = 0;
  // Marks `name` lost if it is not yet and its heartbeat is older than
  // `before_ms`; true when this call did it (of several replicas noticing,
  // one acts).
  virtual Result<bool> markNodeLost(const std::string& name, int64_t before_ms) = 0;
  virtual Status setSandboxNode(const std::string& sandbox_id, const std::string& node) = 0;
  // The node a sandbox of any tenant runs on ("" for none or no such sandbox).
  virtual Result<std::string> sandboxNode(const std::string& sandbox_id) = 0;
  // Sandboxes of every tenant on `node`, neither deleted nor failed.
  virtual Result<std::vector<SandboxRecord>> listNodeSandboxes(const std::string& node) = 0;
  // API replicas: a heartbeat (registers it), those whose last one is older
  // than `before_ms`, and forgetting one.
  virtual Status heartbeatReplica(const std::string& id) = 0;
  virtual Result<std::vector<std::string>> listStaleReplicas(int64_t before_ms) = 0;
  // Those whose last heartbeat is at or after `since_ms`, by id (the first
  // one runs the reaper).
  virtual Result<std::vector<std::string>> listLiveReplicas(int64_t since_ms) = 0;
  virtual Status deleteReplica(const std::string& id) = 0;
  // Hands the unfinished operations of replica `from` to `to` and returns
  // them; of two replicas claiming at once, each operation goes to one.
  virtual Result<std::vector<OperationRecord>> claimOperations(const std::string& from,
                                                               const std::string& to) = 0;

  // Sandbox logs. appendLog stores an entry (at_ms 0: now) and returns its
  // sequence number; a sandbox's entries become visible in sequence order
  // (PostgreSQL: its advisory lock, as appendEvent), so a follower reading
  // "after seq N" misses none.
  virtual Result<int64_t> appendLog(const LogRecord& r) = 0;
  // The tenant's sandbox's entries (none for another tenant's).
  virtual Result<std::vector<LogRecord>> listLogs(const std::string& tenant_id,
                                                  const std::string& sandbox_id,
                                                  const LogQuery& q) = 0;
  // Keeps a sandbox's newest `keep` entries; returns how many went.
  virtual Result<int> trimLogs(const std::string& sandbox_id, int keep) = 0;
  // Forgets the logs of sandboxes that ended (deleted or failed) before
  // `ended_before_ms`; returns how many entries went.
  virtual Result<int> collectLogs(int64_t ended_before_ms) = 0;

  // The template catalogue. putTemplate registers a version; one already
  // there is left as it is, unless `revive` (a build or fork just made it):
  // then it is replaced and a deletion of it undone.
  virtual Status putTemplate(const TemplateRecord& t, bool revive) = 0;
  // Every version, by name then created_at; deleted ones only if asked.
  virtual Result<std::vector<TemplateRecord>> listTemplates(bool with_deleted) = 0;
  // One version, or the newest of `name` when `version` is empty; never a
  // deleted one.
  virtual Result<std::optional<TemplateRecord>> getTemplate(const std::string& name,
                                                            const std::string& version) = 0;
  // Marks a version deleted (kNotFound when there is no such live version).
  virtual Status deleteTemplate(const std::string& name, const std::string& version) = 0;

  // Volumes. insertVolume inserts `v` unless the tenant's volumes would
  // then hold more than `max_total_mib` in all (kResourceExhausted; < 0:
  // no limit): the check and the insert are one transaction serialized per
  // tenant, as insertSandboxAdmitted. A name the tenant has is kAlreadyExists.
  virtual Status insertVolume(const VolumeRecord& v, int64_t max_total_mib) = 0;
  virtual Result<std::optional<VolumeRecord>> getVolume(const std::string& tenant_id,
                                                        const std::string& name) = 0;
  // A tenant's volumes by name.
  virtual Result<std::vector<VolumeRecord>> listVolumes(const std::string& tenant_id) = 0;
  // Every tenant's volumes whose image is on `node` ("" on one machine).
  virtual Result<std::vector<VolumeRecord>> listNodeVolumes(const std::string& node) = 0;
  // Deletes the tenant's volume and returns it; while a mount names it,
  // kFailedPrecondition unless `force` (then its mounts go with it).
  virtual Result<VolumeRecord> deleteVolume(const std::string& tenant_id, const std::string& name,
                                            bool force) = 0;
  virtual Status insertVolumeMount(const VolumeMountRecord& m) = 0;
  virtual Result<std::vector<VolumeMountRecord>> listVolumeMounts(const std::string& volume_id) = 0;
  // Forgets a sandbox's mounts (it ended); returns how many.
  // The volumes a tenant's template expects, replaced whole; by path.
  virtual Status setTemplateVolumes(const std::string& tenant_id, const std::string& template_name,
                                    const std::vector<TemplateVolumeRecord>& v) = 0;
  virtual Result<std::vector<TemplateVolumeRecord>> listTemplateVolumes(
      const std::string& tenant_id, const std::string& template_name) = 0;
  // A sandbox's mounts, by path (a parent directory before what is in it).
  virtual Result<std::vector<VolumeMountRecord>> listSandboxVolumeMounts(
      const std::string& sandbox_id) = 0;
  virtual Result<int> deleteSandboxVolumeMounts(const std::string& sandbox_id) = 0;
};

// Milliseconds since the Unix epoch (the store's timestamps).
int64_t nowMs();

// Opens (creating if needed) the SQLite database at `path` in WAL mode and
// migrates it to the newest schema. Refuses a database whose schema is newer
// than this binary knows. The store's own timestamps (updated_ms, ...) come
// from `clock` (which must outlive the store; null: the system's).
Result<std::unique_ptr<Store>> openSqlite(const std::string& path,
                                          const WallClock* clock = nullptr);

// Connects to the PostgreSQL database at `url` (a libpq URI,
// postgres://user:password@host:port/db?..., or key=value settings) and
// migrates it to the newest schema under an advisory lock, so several
// vesseld starting at once migrate it once. Refuses a newer schema, as
// openSqlite does. The connection is made again after it breaks; a call
// made while the server is away fails with kUnavailable. Connecting gives
// up after 5 s unless the URL sets connect_timeout.
Result<std::unique_ptr<Store>> openPostgres(const std::string& url,
                                            const WallClock* clock = nullptr);

// `url` without its password, for logs and messages.
std::string redactUrl(const std::string& url);

}  // namespace vessel::store
