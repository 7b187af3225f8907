// Template builds as operations: the node runs the build (ops::Node::build);
// the lifecycle records it, relays its progress as events and ends its
// operation, every store write on the io thread.
#include <boost/json.hpp>

#include "base/log.h"
#include "ops/events.h"
#include "ops/lifecycle.h"

namespace vessel::ops {

namespace json = boost::json;

namespace {

Logger opsLog() { return Logger("ops"); }

}  // namespace

// The tenant's credential a from_image build names, as the registry's
// username and password: it must exist and be meant for the image's
// registry (a credential for one host is never sent to another).
Result<templates::RegistryAuth> Lifecycle::registryAuth(const std::string& tenant,
                                                        const templates::BuildSpec& spec) {
  const std::string& name = spec.from_image_credential;
  VESSEL_ASSIGN_OR_RETURN(templates::ImageRef ref, templates::parseImageRef(spec.from_image));
  VESSEL_ASSIGN_OR_RETURN(auto c, egress_.credential(tenant, name));
  if (!c)
    return Error(Code::kNotFound, "from_image_credential: credential '" + name +
                                      "' does not exist (vessel credential list)");
  std::string host = templates::registryHost(ref), hosts;
  bool meant = false;
  for (const auto& h : c->hosts) {
    meant |= h == host;
    hosts += (hosts.empty() ? "" : ", ") + h;
  }
  if (!meant)
    return Error(Code::kInvalidArgument, "from_image_credential: credential '" + name +
                                             "' is for " + (hosts.empty() ? "no host" : hosts) +
                                             ", not the image's registry " + host);
  auto auth = templates::registryAuthFromCredential(c->header, c->value);
  if (!auth.ok())
    return std::move(auth).error().withContext("from_image_credential '" + name + "'");
  return auth;
}

Result<store::OperationRecord> Lifecycle::buildTemplate(const std::string& tenant,
                                                        templates::BuildSpec spec,
                                                        templates::RegistryAuth given) {
  std::string name = spec.name;
  VESSEL_TRY(catalogue_.checkNewName(name));
  // A from_image build boots the image's filesystem: the node pulls and
  // converts it, and there is no base template to hold.
  std::string base_stored;
  if (spec.from_image.empty()) {
    auto base_name = catalogue_.resolve(tenant, spec.base);
    if (!base_name.ok()) return std::move(base_name).error().withContext("base");
    VESSEL_ASSIGN_OR_RETURN(auto base, catalogue_.open(tenant, spec.base, "base template"));
    base_stored = base.stored;
  }

  templates::RegistryAuth auth = std::move(given);
  if (!auth.empty() && (spec.from_image.empty() || !spec.from_image_credential.empty()))
    return Error(Code::kInvalidArgument,
                 "a registry username and password go with from_image, instead of "
                 "from_image_credential");
  if (!spec.from_image_credential.empty()) {
    VESSEL_ASSIGN_OR_RETURN(auth, registryAuth(tenant, spec));
  }

  // A build is a sandbox while it runs: its VM within the tenant's quotas.
  Demand shape{1, spec.memory_mib, spec.vcpus, 0};
  if (auto q = quotaFor(tenant, shape)) return q->withContext("build " + name);
  VESSEL_ASSIGN_OR_RETURN(auto op, log_.begin(tenant, "", "build"));
  builds_in_flight_[op.id] = op;
  build_shapes_[op.id] = shape;
  BuildRequest req;
  req.spec = std::move(spec);
  req.spec.name = TemplateCatalogue::storedName(tenant, name);
  req.base = std::move(base_stored);
  req.tenant = tenant;
  req.registry_auth = std::move(auth);
  BuildCallbacks cb;
  std::weak_ptr<bool> alive = alive_;
  std::string op_id = op.id;
  cb.progress = [this, alive, op_id, name](const std::string& step, int percent) {
    if (!alive.expired()) buildProgress(op_id, name, step, percent);
  };
  cb.log = [this, alive, op_id, name](const templates::BuildLogEntry& e) {
    if (!alive.expired()) buildLog(op_id, name, e);
  };
  cb.done = [this, alive, op_id, name](Result<templates::Manifest> r) {
    if (!alive.expired()) buildDone(op_id, name, std::move(r));
  };
  if (auto s = node_.build(std::move(req), std::move(cb)); !s.ok()) {
    if (auto it = builds_in_flight_.find(op_id); it != builds_in_flight_.end()) {
      log_.set(it->second, OpState::kFailed, &s.error());
      builds_in_flight_.erase(it);
      build_shapes_.erase(op_id);
    }
    return std::move(s).error();
  }
  return op;
}

void Lifecycle::buildProgress(const std::string& op_id, const std::string& name,
                              const std::string& step, int percent) {
  auto it = builds_in_flight_.find(op_id);
  if (it == builds_in_flight_.end()) return;
  store::OperationRecord& o = it->second;
  if (o.state == OpState::kPending) log_.set(o, OpState::kRunning);
  json::object d{{"template", name}, {"step", step}, {"percent", percent}};
  log_.publish({0, o.tenant_id, o.id, "", "template.progress", json::serialize(d)});
}

void Lifecycle::buildLog(const std::string& op_id, const std::string& name,
                         const templates::BuildLogEntry& e) {
  auto it = builds_in_flight_.find(op_id);
  if (it == builds_in_flight_.end()) return;
  const store::OperationRecord& o = it->second;
  json::object d{{"template", name}, {"step", e.step}, {"line", e.line}, {"kind", e.kind}};
  if (!e.text.empty()) d["text"] = e.text;
  if (!e.lines.empty()) {
    json::array lines;
    for (const auto& l : e.lines) lines.push_back(json::string(l));
    d["lines"] = std::move(lines);
  }
  if (e.kind == "done") d["seconds"] = e.seconds;
  log_.publish({0, o.tenant_id, o.id, "", "template.log", json::serialize(d)});
}

void Lifecycle::buildDone(const std::string& op_id, const std::string& name,
                          Result<templates::Manifest> r) {
  auto it = builds_in_flight_.find(op_id);
  if (it == builds_in_flight_.end()) return;
  store::OperationRecord o = it->second;
  builds_in_flight_.erase(it);
  build_shapes_.erase(op_id);
  if (o.state == OpState::kPending) log_.set(o, OpState::kRunning);
  if (!r.ok()) {
    opsLog().warn("template build {} failed: {}", name, r.error().message());
    // The tenant knows its template by its own name, not the stored one.
    std::string msg = r.error().context();
    std::string stored = templates::tenantTemplateName(o.tenant_id, name);
    for (size_t at; (at = msg.find(stored)) != std::string::npos;)
      msg.replace(at, stored.size(), name);
    Error e(r.error().code(), msg, r.error().sysErrno());
    log_.set(o, OpState::kFailed, &e);
    return;
  }
  log_.publish(
      {0, o.tenant_id, o.id, "", "template.built", json::serialize(templateJson(*r, name, false))});
  log_.set(o, OpState::kDone);
  catalogue_.collect();
}

void Lifecycle::failBuildsInFlight() {
  auto builds = std::move(builds_in_flight_);
  builds_in_flight_.clear();
  build_shapes_.clear();
  for (auto& [id, op] : builds) {
    Error e(Code::kUnavailable, "vesseld stopped during the build");
    log_.set(op, OpState::kFailed, &e);
  }
}

}  // namespace vessel::ops
