// The lifecycle's requests that start nothing, or start a create: get,
// list, extend, create, activity and metrics. The reaper is ops/reaper.h,
// template naming ops/template_catalogue.h.
// Actions on existing sandboxes are in lifecycle_actions.cc, restart
// recovery and supervision in lifecycle_recovery.cc.
#include "ops/lifecycle.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "base/disk_space.h"
#include "base/log.h"
#include "base/new_id.h"
#include "ops/events.h"

namespace vessel::ops {

namespace json = boost::json;

namespace {

Logger opsLog() { return Logger("ops"); }

// The sandbox log's first entry of a create: from which template, restored
// from its snapshot or booted, and its shape.
json::object createdEntry(const CreateRequest& in, const store::SandboxRecord& sb,
                          const std::string& op_id) {
  return {{"template", in.template_name},
          {"from", in.cold ? "boot" : "snapshot"},
          {"vcpus", sb.vcpus},
          {"memory_mib", sb.memory_mib},
          {"disk_mib", sb.disk_mib},
          {"operation", op_id}};
}

}  // namespace

bool metadataMatches(const std::map<std::string, std::string>& have,
                     const std::map<std::string, std::string>& want) {
  for (const auto& [k, val] : want) {
    auto f = have.find(k);
    if (f == have.end() || f->second != val) return false;
  }
  return true;
}

Lifecycle::Lifecycle(asio::io_context& io, store::Store& store, Node& node,
                     templates::TemplateStore& templates, const WallClock& clock)
    : io_(io),
      store_(store),
      node_(node),
      templates_(templates),
      clock_(clock),
      sandbox_log_(store, clock),
      log_(store, clock),
      catalogue_(templates),
      egress_(
          store, node, clock,
          [this](const std::string& tenant, const std::string& id) { return get(tenant, id); },
          [this](const std::string& id) { noteActivity(id); }),
      reaper_(io, store, log_, clock, policy_,
              ReapActions{[this](const store::SandboxRecord& sb) -> Status {
                            auto r = remove(sb.tenant_id, sb.id);
                            if (!r.ok()) return std::move(r).error();
                            return okStatus();
                          },
                          [this](const store::SandboxRecord& sb) -> Status {
                            auto r = startAction(sb.tenant_id, sb.id, Action::kPause,
                                                 sb.pause_memory, /*on_timeout=*/true);
                            if (!r.ok()) return std::move(r).error();
                            return okStatus();
                          }}) {
  node_.onLost([this, alive = std::weak_ptr<bool>(alive_)](
                   const std::string& tenant, const std::string& id, const std::string& why) {
    if (!alive.expired()) onLost(tenant, id, why);
  });
  log_.setSandboxLog(&sandbox_log_);
  reaper_.setSandboxLog(&sandbox_log_);
}

Lifecycle::~Lifecycle() {
  alive_.reset();
  node_.onLost(nullptr);
}

void Lifecycle::setMetrics(metrics::Registry& r) {
  log_.setMetrics(r);
  reaper_.setMetrics(r);
  lost_ = &r.counter("vessel_sandboxes_lost_total",
                     "Running sandboxes failed because their VM exited or their agent channel "
                     "failed without anyone asking",
                     {});
  r.addCollector([this](metrics::SampleWriter& w) {
    w.family("vessel_sandboxes", "Sandboxes in each state, every tenant together", "gauge");
    auto by = store_.countSandboxesByState();
    if (!by.ok()) return;
    // Every state appears, 0 included, so a rate or alert never sees a gap.
    for (auto st : store::kAllSandboxStates) {
      int64_t n = 0;
      for (auto& [k, v] : *by)
        if (k == st) n = v;
      w.sample("vessel_sandboxes", {"state"}, {std::string(stateName(st))}, static_cast<double>(n));
    }
  });
}

Result<store::SandboxRecord> Lifecycle::get(const std::string& tenant, const std::string& id) {
  VESSEL_ASSIGN_OR_RETURN(auto sb, store_.getSandbox(tenant, id));
  // Another tenant's sandbox is as absent as one that never existed.
  if (!sb || sb->state == SandboxState::kDeleted)
    return Error(Code::kNotFound, "sandbox " + id + " does not exist");
  return std::move(*sb);
}

namespace {

bool listed(const ListRequest& req, const store::SandboxRecord& s) {
  if (req.state && s.state != *req.state) return false;
  if (!req.states.empty() && !req.states.count(s.state)) return false;
  if (req.created_after_ms && s.created_ms < *req.created_after_ms) return false;
  if (!req.template_name.empty() && s.template_name != req.template_name) return false;
  return metadataMatches(s.metadata, req.metadata);
}

}  // namespace

Result<Page> Lifecycle::list(const ListRequest& req) {
  if (req.order != ListRequest::Order::kById) return listByCreation(req);
  // Pages of the store, in id order, filtered until one more than a page
  // matches (then there is a next page) or the store ends.
  constexpr int kScan = 200;
  std::vector<store::SandboxRecord> hits;
  std::string after = req.page_token;
  size_t want = static_cast<size_t>(req.page_size);
  for (;;) {
    VESSEL_ASSIGN_OR_RETURN(auto batch, store_.listSandboxes(req.tenant, after, kScan));
    for (auto& s : batch) {
      after = s.id;
      if (listed(req, s)) hits.push_back(std::move(s));
      if (hits.size() > want) break;
    }
    if (hits.size() > want || batch.size() < kScan) break;
  }
  Page p;
  if (hits.size() > want) {
    hits.resize(want);
    p.next_page_token = hits.back().id;
  }
  p.sandboxes = std::move(hits);
  return p;
}

Result<Page> Lifecycle::listByCreation(const ListRequest& req) {
  // Every match is read and sorted by (created, id); the token is still the
  // last id shown, and the next page starts after its (created, id) in that
  // order, so a sandbox created meanwhile never shifts a page (newest first,
  // it sorts before them; oldest first, after them).
  constexpr int kScan = 200, kMaxScanned = 20000;
  const bool newest = req.order == ListRequest::Order::kNewestFirst;
  using Key = std::pair<int64_t, std::string>;
  std::optional<Key> cursor;
  if (!req.page_token.empty()) {
    VESSEL_ASSIGN_OR_RETURN(auto at, store_.getSandbox(req.tenant, req.page_token));
    if (!at) return Error(Code::kInvalidArgument, "bad page token");
    cursor = Key{at->created_ms, at->id};
  }
  auto before = [newest](const Key& a, const Key& b) { return newest ? a > b : a < b; };
  std::vector<store::SandboxRecord> hits;
  std::string after;
  for (int scanned = 0; scanned < kMaxScanned;) {
    VESSEL_ASSIGN_OR_RETURN(auto batch, store_.listSandboxes(req.tenant, after, kScan));
    scanned += static_cast<int>(batch.size());
    for (auto& s : batch) {
      after = s.id;
      if (cursor && !before(*cursor, Key{s.created_ms, s.id})) continue;
      if (listed(req, s)) hits.push_back(std::move(s));
    }
    if (batch.size() < kScan) break;
  }
  std::sort(hits.begin(), hits.end(), [&](const auto& a, const auto& b) {
    return before(Key{a.created_ms, a.id}, Key{b.created_ms, b.id});
  });
  Page p;
  size_t want = static_cast<size_t>(req.page_size);
  if (hits.size() > want) {
    hits.resize(want);
    p.next_page_token = hits.back().id;
  }
  p.sandboxes = std::move(hits);
  return p;
}

Result<store::OperationRecord> Lifecycle::getOperation(const std::string& tenant,
                                                       const std::string& id) {
  VESSEL_ASSIGN_OR_RETURN(auto op, store_.getOperation(tenant, id));
  if (!op) return Error(Code::kNotFound, "operation " + id + " does not exist");
  return std::move(*op);
}

asio::awaitable<Result<store::OperationRecord>> Lifecycle::awaitOperation(
    std::string tenant, std::string id, std::chrono::steady_clock::time_point deadline) {
  co_return co_await log_.await(std::move(tenant), std::move(id), deadline);
}

Status Lifecycle::checkStateDisk(std::string_view what) const {
  if (policy_.state_dir.empty()) return okStatus();
  return checkFreeDisk(policy_.state_dir, policy_.min_free_disk_mib, what);
}

std::optional<Error> Lifecycle::quotaFor(const std::string& tenant, const Demand& d) {
  auto lim = store_.tenantLimits(tenant);
  if (!lim.ok()) return lim.error();
  auto use = store_.tenantUsage(tenant);
  if (!use.ok()) return use.error();
  // The store knows sandboxes; the tenant's templates are on this node's disk.
  use->disk_mib += static_cast<int64_t>(catalogue_.tenantDiskMib(tenant));
  return overQuota(*lim, withBuilds(tenant, *use), policy_.quota, d);
}

store::TenantUsage Lifecycle::withBuilds(const std::string& tenant, store::TenantUsage u) const {
  for (const auto& [op_id, shape] : build_shapes_) {
    auto it = builds_in_flight_.find(op_id);
    if (it == builds_in_flight_.end() || it->second.tenant_id != tenant) continue;
    u.sandboxes += 1;
    u.memory_mib += static_cast<int64_t>(shape.memory_mib);
    u.vcpus += static_cast<int64_t>(shape.vcpus);
  }
  return u;
}

store::Store::Admission Lifecycle::admission(const std::string& tenant, const Demand& d) const {
  auto tmpl_mib = static_cast<int64_t>(catalogue_.tenantDiskMib(tenant));
  return [this, tenant, d, tmpl_mib](const store::TenantLimits& l, store::TenantUsage u) {
    u.disk_mib += tmpl_mib;
    return overQuota(l, withBuilds(tenant, u), policy_.quota, d);
  };
}

// Long because every refusal of a create (template, shape, lifetime,
// pause settings, disk, quota, volumes) is made here, before anything is
// stored, and what is stored is one record built in one place.
Result<Accepted> Lifecycle::create(const CreateRequest& in) {
  VESSEL_ASSIGN_OR_RETURN(auto opened, catalogue_.open(in.tenant, in.template_name));
  const std::string& stored = opened.stored;
  const auto& t = opened.tmpl;
  const auto& m = t->manifest;
  // A restore keeps the snapshot's machine: asking for another shape is an
  // error, not something silently ignored.
  if ((in.vcpus && *in.vcpus != m.vcpus) || (in.memory_mib && *in.memory_mib != m.memory_mib))
    return Error(Code::kInvalidArgument, "template '" + in.template_name + "' has " +
                                             std::to_string(m.vcpus) + " vCPUs and " +
                                             std::to_string(m.memory_mib) +
                                             " MiB; restoring it cannot change them");
  int64_t lifetime = in.lifetime_s.value_or(policy_.default_lifetime_s);
  if (lifetime > policy_.max_lifetime_s || in.timeout_s.value_or(0) > policy_.max_lifetime_s)
    return Error(Code::kInvalidArgument, "timeout and lifetime may be at most " +
                                             std::to_string(policy_.max_lifetime_s) +
                                             " seconds here");
  if (in.auto_resume && !in.pause_on_timeout)
    return Error(Code::kInvalidArgument, "auto_resume needs on_timeout pause");
  if (!in.pause_memory && !in.pause_on_timeout)
    return Error(Code::kInvalidArgument, "a pause without memory needs on_timeout pause");
  // Traffic that wakes a sandbox expects the processes it talked to.
  if (in.auto_resume && !in.pause_memory)
    return Error(Code::kInvalidArgument,
                 "auto_resume needs a pause that keeps memory: a disk-only pause boots the "
                 "sandbox again, and it can only be resumed explicitly");
  // The disk: the template's default unless asked, never below its image.
  uint64_t base_mib = t->baseDiskMib();
  if (in.disk_mib && (*in.disk_mib < base_mib || *in.disk_mib > policy_.max_disk_mib))
    return Error(Code::kInvalidArgument, "disk_mib must be between " + std::to_string(base_mib) +
                                             " (template '" + in.template_name + "') and " +
                                             std::to_string(policy_.max_disk_mib) + " here");
  uint64_t disk_mib =
      in.disk_mib.value_or(std::max(base_mib, std::min(t->defaultDiskMib(), policy_.max_disk_mib)));
  Demand demand{1, m.memory_mib, m.vcpus, disk_mib};
  if (auto q = quotaFor(in.tenant, demand)) return *q;
  VESSEL_TRY(checkStateDisk("create"));
  VESSEL_ASSIGN_OR_RETURN(auto volumes, resolveVolumes(in));

  store::SandboxRecord sb;
  sb.id = newId("sb");
  VESSEL_TRY(node_.prepareNetwork(in.tenant, sb.id, in.network));
  sb.tenant_id = in.tenant;
  sb.template_name = in.template_name;
  sb.state = SandboxState::kCreating;
  sb.vcpus = m.vcpus;
  sb.memory_mib = m.memory_mib;
  sb.disk_mib = disk_mib;
  sb.metadata = in.metadata;
  sb.created_ms = sb.updated_ms = sb.last_active_ms = clock_.nowMs();
  sb.idle_timeout_s = in.timeout_s.value_or(policy_.default_idle_timeout_s);
  sb.expires_ms = sb.created_ms + lifetime * 1000;
  sb.pause_on_timeout = in.pause_on_timeout;
  sb.pause_memory = in.pause_memory;
  sb.auto_resume = in.auto_resume;
  sb.lifetime_s = lifetime;
  sb.ingress = in.ingress;  // written in the insert's transaction
  // Checked again with the insert, atomically: another vesseld on the same
  // store may have admitted one since the check above.
  VESSEL_TRY(store_.insertSandboxAdmitted(sb, admission(in.tenant, demand)));
  Status recorded = recordVolumes(sb.id, volumes);
  auto op = recorded.ok() ? log_.begin(in.tenant, sb.id, "create")
                          : Result<store::OperationRecord>(recorded.error());
  if (!op.ok()) {
    (void)store_.setSandboxState(sb.id, SandboxState::kFailed, op.error().message());
    (void)store_.deleteSandboxVolumeMounts(sb.id);
    return std::move(op).error();
  }
  json::object created = createdEntry(in, sb, op->id);
  if (auto r = log_.requestOf(op->id); !r.empty()) created["request_id"] = r;
  sandbox_log_.lifecycle(sb.id, "created", std::move(created));
  NodeCreate c;
  c.id = sb.id;
  c.tenant = in.tenant;
  c.template_name = stored;
  c.env = in.env;
  c.cold = in.cold;
  c.disk_mib = disk_mib;
  c.memory_mib = m.memory_mib;
  if (!volumes.empty()) c.node = volumes.front().node;  // where they are (resolveVolumes)
  busy_[sb.id];
  asio::co_spawn(io_, runCreate(*op, std::move(c), std::move(volumes)), asio::detached);
  return Accepted{std::move(sb), std::move(*op), {}};
}

asio::awaitable<void> Lifecycle::runCreate(store::OperationRecord op, NodeCreate c,
                                           std::vector<VolumeAttachment> volumes) {
  auto alive = std::weak_ptr<bool>(alive_);
  log_.set(op, OpState::kRunning);
  Status s = co_await node_.create(std::move(c));
  if (alive.expired()) co_return;
  if (s.ok() && !volumes.empty()) {
    s = co_await mountVolumes(op.sandbox_id, std::move(volumes));
    if (alive.expired()) co_return;
  }
  if (handOverToDelete(op, s.ok() ? nullptr : &s.error())) co_return;
  if (!s.ok()) {
    opsLog().warn("sandbox {}: create failed: {}", op.sandbox_id, s.error().message());
    setSandbox(op, SandboxState::kFailed, s.error().message());
    log_.set(op, OpState::kFailed, &s.error());
    co_return;
  }
  noteActivity(op.sandbox_id);  // the idle clock starts when it is ready
  setSandbox(op, SandboxState::kRunning);
  log_.set(op, OpState::kDone);
}

Result<store::SandboxRecord> Lifecycle::extend(const std::string& tenant, const std::string& id,
                                               std::optional<int64_t> timeout_s,
                                               std::optional<int64_t> lifetime_s) {
  VESSEL_ASSIGN_OR_RETURN(auto s, get(tenant, id));
  if (s.state == SandboxState::kDeleting || s.state == SandboxState::kFailed)
    return Error(Code::kFailedPrecondition,
                 "sandbox " + id + " is " + std::string(stateName(s.state)) + "; cannot extend");
  int64_t now = clock_.nowMs();
  int64_t idle = timeout_s.value_or(s.idle_timeout_s);
  int64_t expires = lifetime_s ? now + *lifetime_s * 1000 : s.expires_ms;
  // The hard cap is a cap: counted from creation, whatever was asked.
  int64_t cap = s.created_ms + policy_.max_lifetime_s * 1000;
  if (expires > cap || idle > policy_.max_lifetime_s)
    return Error(Code::kInvalidArgument,
                 "a sandbox lives at most " + std::to_string(policy_.max_lifetime_s) +
                     " seconds from its creation here (until " + rfc3339(cap) + ")");
  VESSEL_TRY(store_.setSandboxLifetime(id, idle, expires));
  noteActivity(id);
  return get(tenant, id);
}

Result<store::SandboxRecord> Lifecycle::extendAtLeast(const std::string& tenant,
                                                      const std::string& id, int64_t lifetime_s) {
  VESSEL_ASSIGN_OR_RETURN(auto s, get(tenant, id));
  if (s.state == SandboxState::kDeleting || s.state == SandboxState::kFailed)
    return Error(Code::kFailedPrecondition,
                 "sandbox " + id + " is " + std::string(stateName(s.state)) + "; cannot extend");
  int64_t cap = s.created_ms + policy_.max_lifetime_s * 1000;
  int64_t want = std::min(clock_.nowMs() + std::max<int64_t>(lifetime_s, 0) * 1000, cap);
  if (s.expires_ms == 0 || want <= s.expires_ms) {
    noteActivity(id);
    return get(tenant, id);
  }
  VESSEL_TRY(store_.setSandboxLifetime(id, s.idle_timeout_s, want));
  noteActivity(id);
  return get(tenant, id);
}

asio::awaitable<Result<Usage>> Lifecycle::usage(std::string tenant, std::string id) {
  auto got = get(tenant, id);
  if (!got.ok()) co_return std::move(got).error();
  const auto& s = *got;
  if (s.state != SandboxState::kRunning)
    co_return Error(Code::kFailedPrecondition,
                    "sandbox " + id + " is " + std::string(stateName(s.state)) + "; it has no VM");
  auto measured = co_await node_.usage(id);
  if (!measured.ok()) co_return std::move(measured).error();
  Usage u = *measured;
  // The node measures CPU as one host CPU = 100 %; E2B's is of all vCPUs.
  u.cpu_count = s.vcpus;
  u.cpu_used_pct = std::min(100.0, u.cpu_used_pct / std::max(1u, s.vcpus));
  u.mem_total_bytes = s.memory_mib << 20;
  u.mem_used_bytes = std::min(u.mem_used_bytes, u.mem_total_bytes);
  co_return u;
}

Result<std::vector<store::LogRecord>> Lifecycle::readLog(const std::string& tenant,
                                                         const std::string& id,
                                                         const store::LogQuery& q) {
  VESSEL_ASSIGN_OR_RETURN(auto sb, store_.getSandbox(tenant, id));
  if (!sb) return Error(Code::kNotFound, "sandbox " + id + " does not exist");
  return store_.listLogs(tenant, id, q);
}

void Lifecycle::noteActivity(const std::string& id) {
  if (auto s = store_.touchSandbox(id, clock_.nowMs()); !s.ok())
    opsLog().warn("sandbox {}: {}", id, s.error().message());
}

std::shared_ptr<agentclient::AgentClient> Lifecycle::agentOf(const std::string& id) {
  // Pausing: its VM is still there while its state is saved, but the
  // sandbox is on its way out (E2B shows it paused): the data planes answer
  // as for a paused one rather than reach a guest about to stop.
  if (auto it = actions_.find(id); it != actions_.end() && it->second.kind == "pause")
    return nullptr;
  auto a = node_.agent(id);
  if (a) noteActivity(id);  // the data plane uses it: its idle clock starts again
  return a;
}

}  // namespace vessel::ops
