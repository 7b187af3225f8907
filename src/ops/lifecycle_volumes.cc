// The lifecycle's side of volumes in sandboxes (ops/volume_mounter.h): a
// create's volume names resolved in the tenant's volumes and recorded
// (store volume_mounts) with the sandbox, mounted once its VM runs, and
// let go at its delete.
#include <algorithm>
#include <boost/asio/co_spawn.hpp>

#include "base/log.h"
#include "base/new_id.h"
#include "ops/lifecycle.h"

namespace vessel::ops {

namespace {

Logger volumesLog() { return Logger("ops"); }

}  // namespace

Result<std::vector<VolumeAttachment>> Lifecycle::resolveVolumes(const CreateRequest& in) {
  std::vector<VolumeAttachment> out;
  // A create naming none gets what its template expects (made from a
  // sandbox that mounted them), by name in the tenant's volumes.
  std::vector<VolumeAttachment> expected;
  std::string from_template;
  if (in.volumes.empty()) {
    VESSEL_ASSIGN_OR_RETURN(auto rows, store_.listTemplateVolumes(in.tenant, in.template_name));
    for (auto& r : rows) expected.push_back({"", r.name, r.path, r.read_only});
    if (!expected.empty()) from_template = "template '" + in.template_name + "' expects ";
  }
  const auto& wanted = in.volumes.empty() ? expected : in.volumes;
  if (wanted.empty()) return out;
  if (!mounter_)
    return Error(Code::kUnavailable,
                 "volumes cannot be mounted in sandboxes here (vesseld's log says why: it runs "
                 "as root with vessel-volume-server)");
  for (const auto& want : wanted) {
    VESSEL_ASSIGN_OR_RETURN(auto v, store_.getVolume(in.tenant, want.name));
    if (!v && from_template.empty())
      return Error(Code::kNotFound, "volume '" + want.name + "' does not exist");
    if (!v)
      return Error(Code::kNotFound, from_template + "volume '" + want.name +
                                        "', which does not exist (name the volumes to mount)");
    if (v->read_only && !want.read_only)
      return Error(Code::kInvalidArgument,
                   "volume '" + want.name +
                       "' is a snapshot (read-only): mount it with read_only, or clone it");
    // A sandbox runs where its volumes are (docs/design.md, "Volumes"):
    // on one node, so all of them on that one.
    if (!out.empty() && v->node != out.front().node)
      return Error(Code::kFailedPrecondition,
                   "volumes '" + out.front().name + "' and '" + want.name +
                       "' are on different nodes (" + out.front().node + ", " + v->node +
                       "): the volumes of one sandbox must be on one node");
    VolumeAttachment a = want;
    a.volume_id = v->id;
    a.node = v->node;
    out.push_back(std::move(a));
  }
  return out;
}

Status Lifecycle::recordVolumes(const std::string& id, const std::vector<VolumeAttachment>& v) {
  for (const auto& a : v) {
    store::VolumeMountRecord m;
    m.sandbox_id = id;
    m.volume_id = a.volume_id;
    m.path = a.path;
    m.read_only = a.read_only;
    VESSEL_TRY(store_.insertVolumeMount(m));
  }
  return okStatus();
}

Status Lifecycle::recordTemplateVolumes(const std::string& tenant, const std::string& id,
                                        const std::string& template_name) {
  VESSEL_ASSIGN_OR_RETURN(auto rows, store_.listSandboxVolumeMounts(id));
  VESSEL_ASSIGN_OR_RETURN(auto mine, store_.listVolumes(tenant));
  std::vector<store::TemplateVolumeRecord> expects;
  for (const auto& m : rows)
    for (const auto& v : mine)
      if (v.id == m.volume_id)
        expects.push_back({tenant, template_name, v.name, m.path, m.read_only});
  return store_.setTemplateVolumes(tenant, template_name, expects);
}

Status Lifecycle::inheritVolumes(const std::string& parent, const std::string& copy) {
  VESSEL_ASSIGN_OR_RETURN(auto rows, store_.listSandboxVolumeMounts(parent));
  for (auto& m : rows) {
    m.sandbox_id = copy;
    VESSEL_TRY(store_.insertVolumeMount(m));
  }
  return okStatus();
}

Status Lifecycle::cloneVolumes(const std::string& tenant, const std::string& parent,
                               const std::string& copy, std::vector<VolumeClone>& clones) {
  VESSEL_ASSIGN_OR_RETURN(auto rows, store_.listSandboxVolumeMounts(parent));
  if (rows.empty()) return okStatus();
  VESSEL_ASSIGN_OR_RETURN(auto mine, store_.listVolumes(tenant));
  for (auto& m : rows) {
    auto from = std::find_if(mine.begin(), mine.end(),
                             [&](const store::VolumeRecord& v) { return v.id == m.volume_id; });
    if (from == mine.end())
      return Error(Code::kFailedPrecondition,
                   "sandbox " + parent + ": volume " + m.volume_id + " is gone");
    store::VolumeRecord to = *from;
    to.id = newId("vol");
    // Volume names are at most 63 characters; a copy id is 15.
    to.name = from->name.substr(0, 47) + "-" + copy;
    to.read_only = false;
    to.source_id = from->id;
    to.created_ms = clock_.nowMs();
    VESSEL_TRY_CTX(store_.insertVolume(to, volume_quota_mib_),
                   "clone volume '" + from->name + "' for " + copy);
    clones.push_back({*from, to});
    m.sandbox_id = copy;
    m.volume_id = to.id;
    VESSEL_TRY(store_.insertVolumeMount(m));
  }
  return okStatus();
}

asio::awaitable<Status> Lifecycle::makeClones(std::vector<VolumeClone> clones) {
  for (auto& c : clones) {
    auto op = keeper_->copy(c.from, c.to);
    Status s = co_await std::move(op);
    if (!s.ok())
      co_return std::move(s).error().withContext("clone volume '" + c.from.name + "' as '" +
                                                 c.to.name + "'");
    volumesLog().info("volume {} cloned as {} ({}) for a fork", c.from.name, c.to.name, c.to.id);
  }
  co_return okStatus();
}

void Lifecycle::dropClones(const std::vector<VolumeClone>& clones) {
  for (const auto& c : clones) {
    // The copy's rows first: a volume that is mounted cannot go.
    auto gone = store_.deleteVolume(c.to.tenant_id, c.to.name, true);
    if (!gone.ok() && gone.error().code() != Code::kNotFound)
      volumesLog().warn("volume {}: {}", c.to.name, gone.error().message());
    if (!gone.ok() || !keeper_) continue;
    // Its image, if makeClones got that far (gone already is fine).
    auto drop = keeper_->remove(*gone);
    asio::co_spawn(io_, std::move(drop), [name = c.to.name](std::exception_ptr, Status s) {
      if (!s.ok()) volumesLog().warn("volume {}: {}", name, s.error().message());
    });
  }
}

asio::awaitable<Status> Lifecycle::mountVolumes(std::string id, std::vector<VolumeAttachment> v) {
  auto alive = std::weak_ptr<bool>(alive_);
  Status s = Error(Code::kUnavailable, "sandbox " + id + ": no volume mounter");
  if (mounter_) {
    // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
    auto op = mounter_->mount(id, node_.agent(id), std::move(v));
    s = co_await std::move(op);
  }
  if (alive.expired() || s.ok()) co_return s;
  // A sandbox without the volumes it asked for is not the one asked for.
  volumesLog().warn("sandbox {}: {}", id, s.error().message());
  Status gone = co_await node_.destroy(id);
  if (!gone.ok()) volumesLog().warn("sandbox {}: {}", id, gone.error().message());
  if (!alive.expired()) releaseVolumes(id);
  co_return s;
}

asio::awaitable<void> Lifecycle::quiesceVolumes(std::string id, bool hold) {
  if (!mounter_) co_return;
  auto op = mounter_->quiesce(id, node_.agent(id), hold);
  co_await std::move(op);
}

asio::awaitable<void> Lifecycle::unquiesceVolumes(std::string id) {
  if (!mounter_) co_return;
  auto op = mounter_->unquiesce(id, node_.agent(id));
  co_await std::move(op);
}

asio::awaitable<void> Lifecycle::remountVolumes(std::string id) {
  if (!mounter_) co_return;
  auto rows = store_.listSandboxVolumeMounts(id);
  if (!rows.ok()) {
    volumesLog().warn("sandbox {}: its volumes are not mounted again: {}", id,
                      rows.error().message());
    co_return;
  }
  if (rows->empty()) co_return;
  std::vector<VolumeAttachment> v;
  for (const auto& r : *rows) v.push_back({r.volume_id, r.volume_id, r.path, r.read_only});
  auto op = mounter_->mount(id, node_.agent(id), std::move(v));
  Status s = co_await std::move(op);
  if (!s.ok()) volumesLog().warn("sandbox {}: {}", id, s.error().message());
}

void Lifecycle::releaseVolumes(const std::string& id) {
  if (mounter_) mounter_->release(id);
  if (auto n = store_.deleteSandboxVolumeMounts(id); !n.ok())
    volumesLog().warn("sandbox {}: {}", id, n.error().message());
}

}  // namespace vessel::ops
