// Actions on an existing sandbox: pause, resume, delete (in any state),
// fork and fork into a template. Each is checked against the state table,
// stored as an operation and run on the io thread.
#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "base/log.h"
#include "base/new_id.h"
#include "ops/events.h"
#include "ops/lifecycle.h"

namespace vessel::ops {

namespace json = boost::json;

namespace {

Logger opsLog() { return Logger("ops"); }

}  // namespace

Result<Lifecycle::Legal> Lifecycle::checkAction(const std::string& tenant, const std::string& id,
                                                Action action) {
  VESSEL_ASSIGN_OR_RETURN(auto sb, get(tenant, id));
  auto t = transition(sb.state, action);
  if (!t.ok()) return Error(t.error().code(), "sandbox " + id + ": " + t.error().context());
  return Legal{std::move(sb), *t};
}

Result<Accepted> Lifecycle::pause(const std::string& tenant, const std::string& id,
                                  bool keep_memory) {
  return startAction(tenant, id, Action::kPause, keep_memory);
}

Result<Accepted> Lifecycle::resume(const std::string& tenant, const std::string& id) {
  return startAction(tenant, id, Action::kResume);
}

Result<Accepted> Lifecycle::remove(const std::string& tenant, const std::string& id) {
  return startAction(tenant, id, Action::kDelete);
}

Result<Accepted> Lifecycle::startAction(const std::string& tenant, const std::string& id,
                                        Action action, bool keep_memory, bool on_timeout) {
  VESSEL_ASSIGN_OR_RETURN(Legal legal, checkAction(tenant, id, action));
  if (action == Action::kResume)
    if (auto q = quotaFor(tenant, Demand{0, legal.sandbox.memory_mib, legal.sandbox.vcpus, 0}))
      return *q;
  if (action == Action::kPause) VESSEL_TRY(checkStateDisk("pause"));  // writes its memory out
  VESSEL_ASSIGN_OR_RETURN(auto op, log_.begin(tenant, id, std::string(actionName(action))));
  noteActivity(id);
  setSandbox(op, legal.transition.during);
  // Read before the operation starts: co_spawn runs it inline up to its
  // first suspension, and a delete of a paused sandbox may finish there.
  VESSEL_ASSIGN_OR_RETURN(auto now, get(tenant, id));
  if (action == Action::kDelete) {
    if (auto it = busy_.find(id); it != busy_.end()) {
      // Something is in flight: it is cut short, and the delete runs when
      // it has ended (handOverToDelete), never on a half-made VM.
      it->second = op;
      node_.abort(id);
    } else {
      asio::co_spawn(io_, runDelete(op), asio::detached);
    }
  } else {
    busy_[id];
    actions_[id] = op;
    if (on_timeout) timeout_pauses_.insert(op.id);
    asio::co_spawn(io_, runAction(op, legal.transition, keep_memory), asio::detached);
  }
  return Accepted{std::move(now), std::move(op), {}};
}

bool Lifecycle::handOverToDelete(store::OperationRecord& op, const Error* error) {
  auto it = busy_.find(op.sandbox_id);
  if (it == busy_.end()) return false;
  std::optional<store::OperationRecord> del = std::move(it->second);
  busy_.erase(it);
  if (!del) return false;
  Error e(Code::kFailedPrecondition, "cancelled: the sandbox was deleted" +
                                         (error ? " (" + error->message() + ")" : std::string()));
  log_.set(op, OpState::kFailed, &e);
  asio::co_spawn(io_, runDelete(*del), asio::detached);
  return true;
}

asio::awaitable<void> Lifecycle::runAction(store::OperationRecord op, Transition t,
                                           bool keep_memory) {
  auto alive = std::weak_ptr<bool>(alive_);
  log_.set(op, OpState::kRunning);
  Status s = okStatus();
  if (t.action == Action::kPause) {
    // Saved memory holds no volume request half answered; the servers
    // stay for the resume to carry the sessions on.
    if (keep_memory) co_await quiesceVolumes(op.sandbox_id, true);
    if (alive.expired()) co_return;
    s = co_await node_.pause(op.sandbox_id, keep_memory);
    if (alive.expired()) co_return;
    if (!s.ok() && node_.holding(op.sandbox_id) == Holding::kRunning)
      co_await unquiesceVolumes(op.sandbox_id);
    else if (s.ok() && !keep_memory && mounter_)
      mounter_->release(op.sandbox_id);  // its resume boots anew: mounted anew
  } else if (t.action == Action::kResume) {
    s = co_await node_.resume(op.tenant_id, op.sandbox_id);
    if (alive.expired()) co_return;
    if (s.ok()) co_await remountVolumes(op.sandbox_id);
  } else {
    s = Error(Code::kInternal, "no such action");
  }
  if (alive.expired()) co_return;
  if (auto it = actions_.find(op.sandbox_id); it != actions_.end() && it->second.id == op.id)
    actions_.erase(it);
  bool timeout_pause = timeout_pauses_.erase(op.id) > 0;
  if (handOverToDelete(op, s.ok() ? nullptr : &s.error())) co_return;
  if (!s.ok()) {
    opsLog().warn("sandbox {}: {} failed: {}", op.sandbox_id, actionName(t.action),
                  s.error().message());
    // A failed pause or resume leaves the sandbox as it was, unless the
    // node lost it on the way (its VM died): then it failed.
    Holding h = node_.holding(op.sandbox_id);
    bool intact = (t.from == SandboxState::kRunning && h == Holding::kRunning) ||
                  (t.from == SandboxState::kPaused && h == Holding::kPaused);
    if (intact)
      setSandbox(op, t.from);
    else
      setSandbox(op, SandboxState::kFailed, s.error().message());
    log_.set(op, OpState::kFailed, &s.error());
    // The timeout ended it and it could not be kept paused: it ends as a
    // timeout ends any other sandbox.
    if (timeout_pause && intact)
      if (auto r = remove(op.tenant_id, op.sandbox_id); !r.ok())
        opsLog().warn("sandbox {}: delete after a failed pause: {}", op.sandbox_id,
                      r.error().message());
    co_return;
  }
  setSandbox(op, t.done);
  // A sandbox that pauses on its timeout starts the lifetime it was created
  // with again at each resume (E2B: "the timeout resets each time the
  // sandbox resumes"); a front end may set another (E2B's connect does).
  if (t.action == Action::kResume)
    if (auto sb = store_.getSandbox(op.tenant_id, op.sandbox_id);
        sb.ok() && *sb && (*sb)->pause_on_timeout && (*sb)->lifetime_s > 0) {
      int64_t cap = (*sb)->created_ms + policy_.max_lifetime_s * 1000;
      int64_t until = std::min(clock_.nowMs() + (*sb)->lifetime_s * 1000, cap);
      (void)store_.setSandboxLifetime(op.sandbox_id, (*sb)->idle_timeout_s, until);
    }
  log_.set(op, OpState::kDone);
}

asio::awaitable<void> Lifecycle::runDelete(store::OperationRecord op) {
  auto alive = std::weak_ptr<bool>(alive_);
  log_.set(op, OpState::kRunning);
  // Its volumes first: their servers stop, and the volumes are free to
  // delete once the sandbox is, whatever happens to its VM.
  releaseVolumes(op.sandbox_id);
  Status s = co_await node_.destroy(op.sandbox_id);
  if (alive.expired()) co_return;
  if (!s.ok()) {
    opsLog().warn("sandbox {}: delete failed: {}", op.sandbox_id, s.error().message());
    setSandbox(op, SandboxState::kFailed, s.error().message());
    log_.set(op, OpState::kFailed, &s.error());
    co_return;
  }
  setSandbox(op, SandboxState::kDeleted);
  log_.set(op, OpState::kDone);
  catalogue_.collect();  // it may have held an old version
}

Result<Accepted> Lifecycle::fork(const std::string& tenant, const std::string& id, int count,
                                 bool clone_volumes) {
  if (count < 1 || count > 16) return Error(Code::kInvalidArgument, "count must be 1 to 16");
  if (clone_volumes && !keeper_)
    return Error(Code::kUnavailable, "this vesseld keeps no volumes to clone");
  VESSEL_ASSIGN_OR_RETURN(Legal legal, checkAction(tenant, id, Action::kFork));
  const auto& parent = legal.sandbox;
  if (node_.holding(id) != Holding::kRunning)
    return Error(Code::kUnavailable, "sandbox " + id + " has no VM on this node");
  const uint64_t n = static_cast<uint64_t>(count);
  if (auto q = quotaFor(
          tenant, Demand{count, n * parent.memory_mib, n * parent.vcpus, n * parent.disk_mib}))
    return *q;
  VESSEL_TRY(checkStateDisk("fork"));
  // The copies are recorded first: if vesseld dies mid-fork they are
  // failed records, never VMs nobody knows about.
  std::vector<store::SandboxRecord> copies;
  std::vector<std::string> ids;
  std::vector<VolumeClone> clones;
  auto failAll = [&](const Error& e) {
    for (const auto& c : ids) (void)store_.setSandboxState(c, SandboxState::kFailed, e.message());
    dropClones(clones);
    return e;
  };
  for (int i = 0; i < count; ++i) {
    store::SandboxRecord c = parent;
    c.id = newId("sb");
    c.state = SandboxState::kCreating;
    c.error.clear();
    // A copy keeps its parent's idle timeout and expiry: forking must not
    // be a way past the lifetime cap.
    c.created_ms = c.updated_ms = c.last_active_ms = clock_.nowMs();
    Status s = store_.insertSandboxAdmitted(
        c, admission(tenant, Demand{1, c.memory_mib, c.vcpus, c.disk_mib}));
    if (s.ok()) ids.push_back(c.id);
    if (s.ok()) s = node_.inheritNetwork(id, c.id);
    if (s.ok())
      s = clone_volumes ? cloneVolumes(tenant, id, c.id, clones) : inheritVolumes(id, c.id);
    if (!s.ok()) return failAll(s.error());
    copies.push_back(std::move(c));
  }
  auto op = log_.begin(tenant, id, "fork");
  if (!op.ok()) return failAll(op.error());
  {
    json::array copy_ids;
    for (const auto& c : ids) {
      copy_ids.emplace_back(c);
      json::object from{{"template", legal.sandbox.template_name},
                        {"from", "fork"},
                        {"forked_from", id},
                        {"operation", op->id}};
      if (auto r = log_.requestOf(op->id); !r.empty()) from["request_id"] = r;
      sandbox_log_.lifecycle(c, "created", std::move(from));
    }
    json::object into{{"copies", std::move(copy_ids)}, {"operation", op->id}};
    sandbox_log_.lifecycle(id, "forked", std::move(into));
  }
  setSandbox(*op, legal.transition.during);
  VESSEL_ASSIGN_OR_RETURN(auto now, get(tenant, id));
  if (!clones.empty()) fork_clones_[op->id] = std::move(clones);
  busy_[id];
  for (const auto& c : ids) busy_[c];
  asio::co_spawn(io_, runFork(*op, ids), asio::detached);
  return Accepted{std::move(now), std::move(*op), std::move(copies)};
}

asio::awaitable<void> Lifecycle::runFork(store::OperationRecord op, std::vector<std::string> ids) {
  auto alive = std::weak_ptr<bool>(alive_);
  log_.set(op, OpState::kRunning);
  co_await quiesceVolumes(op.sandbox_id, false);
  if (alive.expired()) co_return;
  // Clones are made while the parent is quiet: each holds what the
  // copy's memory saw written.
  std::vector<VolumeClone> clones;
  if (auto it = fork_clones_.find(op.id); it != fork_clones_.end()) {
    clones = std::move(it->second);
    fork_clones_.erase(it);
  }
  Status cloned = okStatus();
  if (!clones.empty()) {
    auto make = makeClones(clones);
    cloned = co_await std::move(make);
    if (alive.expired()) co_return;
  }
  Result<std::vector<Status>> r = std::vector<Status>{};
  if (cloned.ok())
    r = co_await node_.fork(op.tenant_id, op.sandbox_id, ids);
  else
    r = cloned.error();
  if (alive.expired()) co_return;
  if (!r.ok()) dropClones(clones);
  if (node_.holding(op.sandbox_id) == Holding::kRunning) co_await unquiesceVolumes(op.sandbox_id);
  if (alive.expired()) co_return;
  for (size_t i = 0; i < ids.size(); ++i) {
    Status st = !r.ok()         ? Status(r.error())
                : i < r->size() ? (*r)[i]
                                : Status(Error(Code::kInternal, "the node made too few copies"));
    store::OperationRecord as_copy = op;
    as_copy.sandbox_id = ids[i];
    // A copy deleted while it was being made is deleted now.
    if (handOverToDelete(as_copy, st.ok() ? nullptr : &st.error())) continue;
    if (st.ok()) {
      // The copy's guest still has its parent's mounts, detached: each is
      // mounted anew (the same volumes), replacing them.
      co_await remountVolumes(ids[i]);
      if (alive.expired()) co_return;
      noteActivity(ids[i]);
      setSandbox(as_copy, SandboxState::kRunning);
    } else {
      opsLog().warn("sandbox {}: fork copy {} failed: {}", op.sandbox_id, ids[i],
                    st.error().message());
      setSandbox(as_copy, SandboxState::kFailed, st.error().message());
    }
  }
  if (handOverToDelete(op, r.ok() ? nullptr : &r.error())) co_return;
  bool running = node_.holding(op.sandbox_id) == Holding::kRunning;
  if (!r.ok()) {
    opsLog().warn("sandbox {}: fork failed: {}", op.sandbox_id, r.error().message());
    setSandbox(op, running ? SandboxState::kRunning : SandboxState::kFailed,
               running ? "" : r.error().message());
    log_.set(op, OpState::kFailed, &r.error());
    co_return;
  }
  setSandbox(op, running ? SandboxState::kRunning : SandboxState::kFailed,
             running ? "" : "its VM was lost during the fork");
  log_.set(op, OpState::kDone);
}

Result<Accepted> Lifecycle::forkToTemplate(const std::string& tenant, const std::string& id,
                                           const std::string& name) {
  VESSEL_ASSIGN_OR_RETURN(Legal legal, checkAction(tenant, id, Action::kFork));
  if (node_.holding(id) != Holding::kRunning)
    return Error(Code::kUnavailable, "sandbox " + id + " has no VM on this node");
  VESSEL_TRY(catalogue_.checkNewName(name));
  // The template keeps the sandbox's whole disk and memory on this node.
  if (auto q = quotaFor(tenant, Demand{0, 0, 0, legal.sandbox.disk_mib + legal.sandbox.memory_mib}))
    return *q;
  VESSEL_TRY(checkStateDisk("fork into a template"));
  VESSEL_ASSIGN_OR_RETURN(auto op, log_.begin(tenant, id, "fork"));
  setSandbox(op, legal.transition.during);
  VESSEL_ASSIGN_OR_RETURN(auto now, get(tenant, id));
  busy_[id];
  asio::co_spawn(io_, runForkToTemplate(op, name), asio::detached);
  return Accepted{std::move(now), std::move(op), {}};
}

asio::awaitable<void> Lifecycle::runForkToTemplate(store::OperationRecord op, std::string name) {
  auto alive = std::weak_ptr<bool>(alive_);
  log_.set(op, OpState::kRunning);
  std::string stored = templates::tenantTemplateName(op.tenant_id, name);
  co_await quiesceVolumes(op.sandbox_id, false);
  if (alive.expired()) co_return;
  auto r = co_await node_.forkToTemplate(op.sandbox_id, stored);
  if (alive.expired()) co_return;
  if (node_.holding(op.sandbox_id) == Holding::kRunning) co_await unquiesceVolumes(op.sandbox_id);
  if (alive.expired()) co_return;
  if (handOverToDelete(op, r.ok() ? nullptr : &r.error())) co_return;
  bool running = node_.holding(op.sandbox_id) == Holding::kRunning;
  setSandbox(op, running ? SandboxState::kRunning : SandboxState::kFailed,
             running ? "" : "its VM was lost during the fork");
  if (!r.ok()) {
    opsLog().warn("sandbox {}: fork into template {} failed: {}", op.sandbox_id, name,
                  r.error().message());
    log_.set(op, OpState::kFailed, &r.error());
    co_return;
  }
  if (auto s = recordTemplateVolumes(op.tenant_id, op.sandbox_id, name); !s.ok())
    opsLog().warn("template {}: its volumes are not recorded: {}", name, s.error().message());
  log_.publish({0, op.tenant_id, op.id, op.sandbox_id, "template.built",
                json::serialize(templateJson(*r, name, false))});
  log_.set(op, OpState::kDone);
  catalogue_.collect();
}

asio::awaitable<Result<store::SandboxRecord>> Lifecycle::settled(
    std::string tenant, std::string id, std::chrono::steady_clock::time_point deadline) {
  auto alive = std::weak_ptr<bool>(alive_);
  for (;;) {
    VESSEL_CO_ASSIGN_OR_RETURN(auto found, store_.findSandbox(id));
    // Another tenant's sandbox is as absent as one that never existed.
    if (!found || found->state == SandboxState::kDeleted ||
        (!tenant.empty() && found->tenant_id != tenant))
      co_return Error(Code::kNotFound, "sandbox " + id + " does not exist");
    if (found->state != SandboxState::kPausing && found->state != SandboxState::kResuming)
      co_return std::move(*found);
    if (std::chrono::steady_clock::now() >= deadline)
      co_return Error(Code::kDeadlineExceeded,
                      "sandbox " + id + " is still " + std::string(stateName(found->state)));
    if (auto it = actions_.find(id); it != actions_.end()) {
      auto op = it->second;
      auto done = co_await log_.await(op.tenant_id, op.id, deadline);
      if (alive.expired()) co_return Error(Code::kUnavailable, "the lifecycle is stopping");
      if (!done.ok()) co_return std::move(done).error();
      continue;
    }
    // Another replica's operation: look again shortly.
    asio::steady_timer t(io_, std::chrono::milliseconds(100));
    (void)co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    if (alive.expired()) co_return Error(Code::kUnavailable, "the lifecycle is stopping");
  }
}

asio::awaitable<Status> Lifecycle::wake(std::string id,
                                        std::chrono::steady_clock::time_point deadline) {
  auto alive = std::weak_ptr<bool>(alive_);
  auto gone = [] { return Error(Code::kUnavailable, "the lifecycle is stopping"); };
  // Each round waits for a pause or resume in flight, then looks at where
  // the sandbox landed; a paused one is resumed and looked at again.
  while (std::chrono::steady_clock::now() < deadline) {
    auto found = co_await settled("", id, deadline);
    if (alive.expired()) co_return gone();
    if (!found.ok()) co_return std::move(found).error();
    const store::SandboxRecord sb = std::move(*found);
    switch (sb.state) {
      case SandboxState::kRunning:
      case SandboxState::kForking:  // briefly paused while copied; running again at once
        noteActivity(id);
        co_return okStatus();
      case SandboxState::kPaused: {
        if (!sb.auto_resume)
          co_return Error(
              Code::kFailedPrecondition,
              "sandbox " + id + " is paused and was not created with auto-resume; resume it first");
        auto r = resume(sb.tenant_id, id);
        if (!r.ok()) co_return std::move(r).error();
        opsLog().info("sandbox {}: woken by traffic (auto-resume)", id);
        auto done = co_await log_.await(sb.tenant_id, r->operation.id, deadline);
        if (alive.expired()) co_return gone();
        if (!done.ok()) co_return std::move(done).error();
        if (done->state == OpState::kFailed)
          co_return Error(Code::kUnavailable,
                          "resume of sandbox " + id + " failed: " + done->error_message);
        break;
      }
      default:
        co_return Error(
            Code::kFailedPrecondition,
            "sandbox " + id + " is " + std::string(stateName(sb.state)) + "; nothing can wake it");
    }
  }
  co_return Error(Code::kDeadlineExceeded, "sandbox " + id + " was not running in time");
}

}  // namespace vessel::ops
