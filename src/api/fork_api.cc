// POST /v1/sandboxes/{id}:fork — copies a running sandbox into `count` new
// ones. The new sandboxes are recorded (state creating) before the answer,
// so the 202 names them; the operation belongs to the source, which is
// `forking` while its state is copied and `running` again afterwards.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/json.hpp>

#include "api/api_log.h"
#include "api/control_plane.h"
#include "api/resources.h"
#include "base/log.h"

namespace vessel::api {

namespace json = boost::json;
using ops::Action;
using ops::OpState;
using ops::SandboxState;

Response ControlPlane::forkSandbox(const Request& req, const std::string& tenant,
                                   const std::string& id) {
  auto in = parseForkRequest(req.body());
  if (!in.ok()) return errorResponse(req, in.error());
  auto checked = checkAction(req, tenant, id, Action::kFork);
  if (auto* r = std::get_if<Response>(&checked)) return std::move(*r);
  auto& [parent, t] = std::get<Legal>(checked);
  if (!live_.count(id))
    return errorResponse(req,
                         Error(Code::kUnavailable, "sandbox " + id + " has no VM on this node"));
  if (!in->template_name.empty()) return forkToTemplate(req, parent, in->template_name, t);

  if (auto q = overQuota(tenant, static_cast<uint64_t>(in->count) * parent.memory_mib, in->count))
    return errorResponse(req, *q);
  // The copies are recorded first: if vesseld dies mid-fork they are
  // failed records, never VMs nobody knows about.
  json::array children;
  std::vector<std::string> ids;
  for (int i = 0; i < in->count; ++i) {
    store::SandboxRecord c = parent;
    c.id = node::newId("sb");
    c.state = std::string(ops::stateName(SandboxState::kCreating));
    c.error.clear();
    // A copy gets the parent's idle timeout and a lifetime as long as the
    // parent's, counted from now.
    int64_t now = store::nowMs();
    if (parent.expires_ms > 0) c.expires_ms = now + (parent.expires_ms - parent.created_ms);
    c.created_ms = c.updated_ms = c.last_active_ms = now;
    Status s = store_.insertSandbox(c);
    if (s.ok() && network_) s = network_->inherit(id, c.id);
    if (!s.ok()) {
      (void)store_.setSandboxState(c.id, "failed", s.error().message());
      for (const auto& done : ids)
        (void)store_.setSandboxState(done, "failed", s.error().message());
      return errorResponse(req, s.error());
    }
    ids.push_back(c.id);
    children.push_back(sandboxJson(c));
  }
  auto op = newOperation(tenant, id, "fork");
  if (!op.ok()) {
    for (const auto& c : ids) (void)store_.setSandboxState(c, "failed", op.error().message());
    return errorResponse(req, op.error());
  }
  setSandbox(*op, t.during, "");
  if (auto now = store_.getSandbox(tenant, id); now.ok() && now->has_value()) parent = **now;
  asio::co_spawn(io_, runFork(*op, ids), asio::detached);
  json::object o{{"sandbox", sandboxJson(parent)},
                 {"operation", operationJson(*op)},
                 {"sandboxes", std::move(children)}};
  return jsonResponse(req, http::status::accepted, json::serialize(o));
}

asio::awaitable<void> ControlPlane::runFork(store::OperationRecord op,
                                            std::vector<std::string> ids) {
  setOperation(op, OpState::kRunning, nullptr);
  auto it = live_.find(op.sandbox_id);
  Result<std::vector<std::shared_ptr<node::Sandbox>>> r =
      Error(Code::kUnavailable, "sandbox " + op.sandbox_id + " has no VM on this node");
  if (it != live_.end()) {
    std::shared_ptr<node::Sandbox> src = it->second;  // kept alive across the await
    r = co_await runtime_.forkAs(*src, ids);
  }
  if (!r.ok()) {
    log().forSandbox(op.sandbox_id).warn("fork failed: {}", r.error().message());
    for (const auto& c : ids) setSandboxOf(op, c, SandboxState::kFailed, r.error().message());
    setSandbox(op, SandboxState::kRunning, "");
    setOperation(op, OpState::kFailed, &r.error());
    co_return;
  }
  for (auto& c : *r) {
    // Each copy's egress policy, as at create: no copy runs with a network
    // it was not given.
    if (network_) {
      if (auto a = network_->attach(op.tenant_id, *c); !a.ok()) {
        log().forSandbox(c->id()).warn("fork: {}", a.error().message());
        (void)co_await runtime_.destroy(*c);
        setSandboxOf(op, c->id(), SandboxState::kFailed, a.error().message());
        continue;
      }
    }
    live_[c->id()] = c;
    setSandboxOf(op, c->id(), SandboxState::kRunning, "");
  }
  setSandbox(op, SandboxState::kRunning, "");
  setOperation(op, OpState::kDone, nullptr);
}

void ControlPlane::setSandboxOf(const store::OperationRecord& op, const std::string& id,
                                SandboxState state, const std::string& error) {
  std::string name(ops::stateName(state));
  if (auto s = store_.setSandboxState(id, name, error); !s.ok())
    log().error("sandbox {}: {}", id, s.error().message());
  json::object data{{"id", id}, {"state", name}};
  if (!error.empty()) data["error"] = error;
  publish({0, op.tenant_id, op.id, id, "sandbox.state", json::serialize(data)});
}

}  // namespace vessel::api
