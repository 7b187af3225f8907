#include "api/control_plane.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <ctime>

#include "api/api_log.h"
#include "api/auth.h"
#include "api/resources.h"
#include "base/log.h"

namespace vessel::api {

namespace json = boost::json;
using ops::Action;
using ops::OpState;
using ops::SandboxState;

namespace {

// "/a/b:c" -> {"a", "b:c"}; empty segments are kept so "//" is rejected.
std::vector<std::string> splitPath(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 1;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

Response accepted(const Request& req, const store::SandboxRecord& sb,
                  const store::OperationRecord& op) {
  json::object o{{"sandbox", sandboxJson(sb)}, {"operation", operationJson(op)}};
  return jsonResponse(req, http::status::accepted, json::serialize(o));
}

}  // namespace

ControlPlane::ControlPlane(asio::io_context& io, store::Store& store, node::Runtime& runtime,
                           templates::TemplateStore& templates, NetworkApi* network)
    : io_(io), store_(store), runtime_(runtime), templates_(templates), network_(network) {}

ControlPlane::~ControlPlane() {
  alive_.reset();
  builder_.reset();
  for (auto* t : *waiters_) t->cancel();
}

void ControlPlane::install(HttpServer& server) {
  server.routePrefix("/v1/", [this](const Request& req, boost::beast::tcp_stream& stream) {
    return handle(req, stream);
  });
}

std::shared_ptr<node::AgentClient> ControlPlane::agentOf(const std::string& sandbox_id) {
  auto it = live_.find(sandbox_id);
  if (it == live_.end() || it->second->state() != node::Sandbox::State::kRunning) return nullptr;
  noteActivity(sandbox_id);  // the data plane uses it: its idle clock starts again
  return it->second->agent();
}

void ControlPlane::setMetrics(metrics::Registry& r) {
  op_latency_ = &r.histogram("vessel_operation_duration_seconds",
                             "Time from an operation's request to its end, by kind and outcome",
                             {"kind", "state"});
  reaped_ = &r.counter("vessel_sandboxes_expired_total",
                       "Sandboxes the reaper ended, by reason (idle, lifetime)", {"reason"});
  op_errors_ = &r.counter("vessel_operation_errors_total",
                          "Failed operations, by kind and error code", {"kind", "code"});
  r.addCollector([this](metrics::SampleWriter& w) {
    w.family("vessel_sandboxes", "Sandboxes in each state, every tenant together", "gauge");
    auto by = store_.countSandboxesByState();
    if (!by.ok()) return;
    // Every state appears, 0 included, so a rate or alert never sees a gap.
    for (auto st : {SandboxState::kCreating, SandboxState::kRunning, SandboxState::kPausing,
                    SandboxState::kPaused, SandboxState::kResuming, SandboxState::kForking,
                    SandboxState::kDeleting, SandboxState::kDeleted, SandboxState::kFailed}) {
      std::string name(ops::stateName(st));
      int64_t n = 0;
      for (auto& [k, v] : *by)
        if (k == name) n = v;
      w.sample("vessel_sandboxes", {"state"}, {name}, static_cast<double>(n));
    }
  });
}

asio::awaitable<void> ControlPlane::shutdown(bool stop_vms) {
  stopTemplateBuilds();
  if (reap_timer_) {
    reap_timer_->cancel();
    reap_timer_.reset();
  }
  auto live = std::move(live_);
  live_.clear();
  for (auto& [id, sb] : live) {
    if (sb->state() != node::Sandbox::State::kRunning) continue;
    if (!stop_vms) {
      // Let go of the channels only; QEMU runs on (own session, no death
      // signal) with its network slot, and the next vesseld adopts both.
      // Its gateway registration goes with the gateway; the next vesseld
      // registers it again.
      runtime_.release(*sb);
      continue;
    }
    if (network_) network_->detach(id);
    (void)co_await runtime_.destroy(*sb);
    std::string why = "vesseld stopped; the VM was stopped";
    if (auto s = store_.setSandboxState(id, "failed", why); !s.ok())
      log().error("sandbox {}: {}", id, s.error().message());
  }
  co_await runtime_.drainPools();
}

asio::awaitable<int> ControlPlane::recover() {
  auto sandboxes = store_.listLiveSandboxes();
  auto ops = store_.listUnfinishedOperations();
  if (!sandboxes.ok() || !ops.ok()) {
    log().error("recovery: cannot read the store: {}",
                (!sandboxes.ok() ? sandboxes.error() : ops.error()).message());
    co_return 0;
  }
  std::map<std::string, std::vector<store::OperationRecord>> by_sandbox;
  for (auto& op : *ops) by_sandbox[op.sandbox_id].push_back(op);
  std::set<std::string> keep;
  int adopted = 0, failed = 0;
  for (auto& sb : *sandboxes) {
    auto it = by_sandbox.find(sb.id);
    std::vector<store::OperationRecord> mine;
    if (it != by_sandbox.end()) {
      mine = std::move(it->second);
      by_sandbox.erase(it);
    }
    co_await recoverSandbox(sb, std::move(mine), keep);
    if (keep.count(sb.id))
      ++adopted;
    else
      ++failed;
  }
  // Operations whose sandbox is already gone or failed.
  for (auto& [id, list] : by_sandbox)
    for (auto& op : list) {
      Error e(Code::kUnavailable, "vesseld restarted while the operation was in flight");
      setOperation(op, OpState::kFailed, &e);
    }
  int discarded = co_await runtime_.discardOrphans(keep);
  collectTemplates();  // after every surviving sandbox holds its version again
  if (!sandboxes->empty() || discarded > 0)
    log().info("recovery: {} sandbox(es) taken over, {} lost, {} leftover director(ies) removed",
               adopted, failed, discarded);
  co_return adopted;
}

asio::awaitable<void> ControlPlane::recoverSandbox(store::SandboxRecord rec,
                                                   std::vector<store::OperationRecord> ops,
                                                   std::set<std::string>& keep) {
  auto slog = log().forSandbox(rec.id);
  auto sb = co_await runtime_.adopt(rec.id);
  if (sb.ok() && (*sb)->state() == node::Sandbox::State::kRunning && network_) {
    // The restarted gateway knows nothing of it: its policy goes back
    // before anything else can happen. Without it the guest would have no
    // network it was promised, so the VM goes instead.
    if (auto a = network_->attach(rec.tenant_id, **sb); !a.ok()) {
      (void)co_await runtime_.destroy(**sb);
      sb = Error(a.error().code(),
                 "its network policy could not be registered again: " + a.error().message());
    }
  }
  std::optional<SandboxState> actual;
  if (sb.ok()) {
    bool running = (*sb)->state() == node::Sandbox::State::kRunning;
    actual = running ? SandboxState::kRunning : SandboxState::kPaused;
    if (running) live_[rec.id] = *sb;
    keep.insert(rec.id);
    slog.info("taken over after restart ({})", ops::stateName(*actual));
  } else {
    slog.warn("not taken over after restart: {}", sb.error().message());
  }
  // The newest unfinished operation decides; older ones cannot be in
  // flight at once (the state table forbids it) but are ended all the same.
  std::optional<store::OperationRecord> op;
  for (auto& o : ops) {
    if (op) {
      Error e(Code::kUnavailable, "vesseld restarted; superseded");
      setOperation(*op, OpState::kFailed, &e);
    }
    op = o;
  }
  auto fail = [&](const std::string& why) {
    store::OperationRecord as_op = op.value_or(store::OperationRecord{});
    as_op.sandbox_id = rec.id;
    as_op.tenant_id = rec.tenant_id;
    setSandbox(as_op, SandboxState::kFailed, why);
    if (op) {
      Error e(Code::kUnavailable, why);
      setOperation(*op, OpState::kFailed, &e);
    }
  };
  auto settle = [&](SandboxState st) {
    store::OperationRecord as_op = op.value_or(store::OperationRecord{});
    as_op.sandbox_id = rec.id;
    as_op.tenant_id = rec.tenant_id;
    if (rec.state != ops::stateName(st)) setSandbox(as_op, st, "");
    if (op) setOperation(*op, OpState::kDone, nullptr);
  };
  auto rerun = [&](Action a) {
    auto t = ops::transition(*actual, a);
    if (!t.ok()) {
      fail("vesseld restarted during " + op->kind + ": " + t.error().message());
      return;
    }
    slog.info("resuming the {} operation {} after restart", op->kind, op->id);
    setSandbox(*op, t->during, "");
    asio::co_spawn(io_, runAction(*op, *t), asio::detached);
  };
  std::string lost = "vesseld restarted and the VM could not be taken over: " +
                     (sb.ok() ? std::string() : sb.error().message());
  std::string kind = op ? op->kind : "";
  if (kind == "create") {
    if (actual == SandboxState::kRunning)
      settle(SandboxState::kRunning);
    else
      fail("vesseld restarted before the sandbox was ready; its VM was discarded");
  } else if (kind == "pause") {
    if (actual == SandboxState::kPaused)
      settle(SandboxState::kPaused);
    else if (actual == SandboxState::kRunning)
      rerun(Action::kPause);
    else
      fail(lost);
  } else if (kind == "resume") {
    if (actual == SandboxState::kRunning)
      settle(SandboxState::kRunning);
    else if (actual == SandboxState::kPaused)
      rerun(Action::kResume);
    else
      fail(lost);
  } else if (kind == "delete") {
    if (actual) {
      rerun(Action::kDelete);
    } else {
      // Nothing left to delete: what the caller asked for has happened.
      settle(SandboxState::kDeleted);
    }
  } else if (kind == "fork" && actual) {
    // The parent carries on; copies that were not finished are failed on
    // their own records (they have no operation of their own).
    store::OperationRecord as_op = *op;
    if (rec.state != ops::stateName(*actual)) setSandbox(as_op, *actual, "");
    Error e(Code::kUnavailable, "vesseld restarted during the fork; unfinished copies failed");
    setOperation(*op, OpState::kFailed, &e);
  } else if (actual) {
    settle(*actual);
  } else if (rec.state == "deleting") {
    settle(SandboxState::kDeleted);
  } else {
    fail(lost);
  }
}

std::shared_ptr<node::Sandbox> ControlPlane::liveSandbox(const std::string& tenant,
                                                         const std::string& id) {
  auto rec = store_.getSandbox(tenant, id);
  if (!rec.ok() || !rec->has_value()) return nullptr;  // another tenant's is absent
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : it->second;
}

asio::awaitable<std::optional<Response>> ControlPlane::handle(const Request& req,
                                                              boost::beast::tcp_stream& stream) {
  auto tenant = authenticate(req, store_);
  if (!tenant.ok()) co_return errorResponse(req, tenant.error());
  std::string path(req.target());
  if (auto q = path.find('?'); q != std::string::npos) path.resize(q);
  auto seg = splitPath(path);  // seg[0] == "v1"
  auto method = req.method();
  if (network_)
    if (auto r = network_->handle(req, *tenant, seg)) co_return std::move(*r);
  auto notAllowed = [&](std::string_view allow) { return methodNotAllowed(req, path, allow); };

  if (seg.size() == 2 && seg[1] == "sandboxes") {
    if (method == http::verb::post) co_return createSandbox(req, *tenant);
    if (method == http::verb::get) co_return listSandboxes(req, *tenant);
    co_return notAllowed("GET, POST");
  }
  if (seg.size() == 2 && seg[1] == "templates") {
    if (method == http::verb::post) co_return buildTemplate(req, *tenant);
    if (method == http::verb::get) co_return listTemplates(req, *tenant);
    co_return notAllowed("GET, POST");
  }
  if (seg.size() == 3 && seg[1] == "sandboxes") {
    std::string id = seg[2], verb;
    if (auto c = id.find(':'); c != std::string::npos) {
      verb = id.substr(c + 1);
      id.resize(c);
    }
    if (!validId(id)) co_return errorResponse(req, Error(Code::kInvalidArgument, "bad sandbox id"));
    if (verb.empty()) {
      if (method == http::verb::get) co_return getSandbox(req, *tenant, id);
      if (method == http::verb::delete_) co_return requestAction(req, *tenant, id, Action::kDelete);
      co_return notAllowed("GET, DELETE");
    }
    if (method != http::verb::post) co_return notAllowed("POST");
    if (verb == "pause") co_return requestAction(req, *tenant, id, Action::kPause);
    if (verb == "resume") co_return requestAction(req, *tenant, id, Action::kResume);
    if (verb == "fork") co_return forkSandbox(req, *tenant, id);
    if (verb == "extend") co_return extendSandbox(req, *tenant, id);
    co_return errorResponse(req, Error(Code::kNotFound, "no such sandbox method: " + verb));
  }
  if (seg.size() == 4 && seg[1] == "sandboxes" && seg[3] == "sessions" && sessions_) {
    if (!validId(seg[2]))
      co_return errorResponse(req, Error(Code::kInvalidArgument, "bad sandbox id"));
    if (method != http::verb::post) co_return notAllowed("POST");
    co_return sessions_->create(req, *tenant, seg[2]);
  }
  if (seg.size() >= 3 && seg.size() <= 4 && seg[1] == "operations") {
    if (!validId(seg[2]))
      co_return errorResponse(req, Error(Code::kInvalidArgument, "bad operation id"));
    if (method != http::verb::get) co_return notAllowed("GET");
    if (seg.size() == 3) co_return getOperation(req, *tenant, seg[2]);
    if (seg[3] == "events") co_return co_await streamEvents(req, stream, *tenant, seg[2]);
  }
  if (seg.size() == 2 && seg[1] == "events") {
    if (method != http::verb::get) co_return notAllowed("GET");
    co_return co_await streamEvents(req, stream, *tenant, "");
  }
  co_return errorResponse(req, Error(Code::kNotFound, "no such endpoint: " + path));
}

Response ControlPlane::createSandbox(const Request& req, const std::string& tenant) {
  auto in = parseCreateRequest(req.body());
  if (!in.ok()) return errorResponse(req, in.error());
  auto stored = resolveTemplate(tenant, in->template_name);
  if (!stored.ok()) return errorResponse(req, stored.error());
  auto t = templates_.open(*stored);
  if (!t.ok()) {
    if (t.error().code() == Code::kNotFound)
      return errorResponse(
          req, Error(Code::kNotFound, "template '" + in->template_name + "' does not exist"));
    log().error("open template {}: {}", in->template_name, t.error().message());
    return errorResponse(
        req, Error(Code::kUnavailable, "template '" + in->template_name + "' is not usable"));
  }
  const auto& m = (*t)->manifest;
  // A restore keeps the snapshot's machine: asking for another shape is an
  // error, not something silently ignored.
  if ((in->vcpus && *in->vcpus != m.vcpus) || (in->memory_mib && *in->memory_mib != m.memory_mib))
    return errorResponse(
        req, Error(Code::kInvalidArgument, "template '" + in->template_name + "' has " +
                                               std::to_string(m.vcpus) + " vCPUs and " +
                                               std::to_string(m.memory_mib) +
                                               " MiB; restoring it " + "cannot change them"));

  int64_t lifetime = in->lifetime_s.value_or(policy_.default_lifetime_s);
  if (lifetime > policy_.max_lifetime_s || in->timeout_s.value_or(0) > policy_.max_lifetime_s)
    return errorResponse(req, Error(Code::kInvalidArgument,
                                    "timeout and lifetime may be at most " +
                                        std::to_string(policy_.max_lifetime_s) + " seconds here"));
  if (auto q = overQuota(tenant, m.memory_mib, 1)) return errorResponse(req, *q);

  store::SandboxRecord sb;
  sb.id = node::newId("sb");
  node::GuestNetwork guest_net;
  if (network_) {
    auto g = network_->prepare(tenant, sb.id, in->network.value_or(network_->defaults()));
    if (!g.ok()) return errorResponse(req, g.error());
    guest_net = std::move(*g);
  }
  sb.tenant_id = tenant;
  sb.template_name = in->template_name;
  sb.state = std::string(ops::stateName(SandboxState::kCreating));
  sb.vcpus = m.vcpus;
  sb.memory_mib = m.memory_mib;
  sb.metadata_json = json::serialize(in->metadata);
  sb.created_ms = sb.updated_ms = sb.last_active_ms = store::nowMs();
  sb.idle_timeout_s = in->timeout_s.value_or(policy_.default_idle_timeout_s);
  sb.expires_ms = sb.created_ms + lifetime * 1000;
  if (auto s = store_.insertSandbox(sb); !s.ok()) return errorResponse(req, s.error());
  auto op = newOperation(tenant, sb.id, "create");
  if (!op.ok()) {
    (void)store_.setSandboxState(sb.id, "failed", op.error().message());
    return errorResponse(req, op.error());
  }
  node::CreateOptions opts;
  opts.id = sb.id;
  opts.env = in->env;
  opts.network = std::move(guest_net);
  opts.cold = in->cold;
  asio::co_spawn(io_, runCreate(*op, *stored, std::move(opts)), asio::detached);
  return accepted(req, sb, *op);
}

Response ControlPlane::getSandbox(const Request& req, const std::string& tenant,
                                  const std::string& id) {
  auto sb = store_.getSandbox(tenant, id);
  if (!sb.ok()) return errorResponse(req, sb.error());
  // Another tenant's sandbox is as absent as one that never existed.
  if (!sb->has_value() || (*sb)->state == "deleted")
    return errorResponse(req, Error(Code::kNotFound, "sandbox " + id + " does not exist"));
  return jsonResponse(req, http::status::ok, json::serialize(sandboxJson(**sb)));
}

Response ControlPlane::listSandboxes(const Request& req, const std::string& tenant) {
  auto q = parseListQuery(req.target());
  if (!q.ok()) return errorResponse(req, q.error());
  // Pages of the store, in id order, filtered by metadata until one more
  // than a page matches (then there is a next page) or the store ends.
  constexpr int kScan = 200;
  std::vector<store::SandboxRecord> hits;
  std::string after = q->page_token;
  for (;;) {
    auto batch = store_.listSandboxes(tenant, after, kScan);
    if (!batch.ok()) return errorResponse(req, batch.error());
    for (auto& s : *batch) {
      after = s.id;
      if (metadataMatches(s.metadata_json, q->metadata)) hits.push_back(std::move(s));
      if (hits.size() > static_cast<size_t>(q->page_size)) break;
    }
    if (hits.size() > static_cast<size_t>(q->page_size) || batch->size() < kScan) break;
  }
  json::array items;
  std::string next;
  for (size_t i = 0; i < hits.size(); ++i) {
    if (i == static_cast<size_t>(q->page_size)) {
      next = hits[i - 1].id;
      break;
    }
    items.push_back(sandboxJson(hits[i]));
  }
  json::object o{{"sandboxes", std::move(items)}, {"next_page_token", next}};
  return jsonResponse(req, http::status::ok, json::serialize(o));
}

std::variant<Response, ControlPlane::Legal> ControlPlane::checkAction(const Request& req,
                                                                      const std::string& tenant,
                                                                      const std::string& id,
                                                                      Action action) {
  auto sb = store_.getSandbox(tenant, id);
  if (!sb.ok()) return errorResponse(req, sb.error());
  // Another tenant's sandbox is as absent as one that never existed.
  if (!sb->has_value() || (*sb)->state == "deleted")
    return errorResponse(req, Error(Code::kNotFound, "sandbox " + id + " does not exist"));
  auto state = ops::parseState((*sb)->state);
  if (!state) return errorResponse(req, Error(Code::kInternal, "sandbox " + id + ": bad state"));
  auto t = ops::transition(*state, action);
  if (!t.ok()) {
    json::object details{{"state", (*sb)->state}};
    return errorResponse(req, Error(t.error().code(), "sandbox " + id + ": " + t.error().context()),
                         details);
  }
  return Legal{std::move(**sb), *t};
}

Response ControlPlane::requestAction(const Request& req, const std::string& tenant,
                                     const std::string& id, Action action) {
  auto checked = checkAction(req, tenant, id, action);
  if (auto* r = std::get_if<Response>(&checked)) return std::move(*r);
  auto& [sandbox, t] = std::get<Legal>(checked);
  if (action == Action::kResume)
    if (auto q = overQuota(tenant, sandbox.memory_mib, 0)) return errorResponse(req, *q);
  auto op = newOperation(tenant, id, std::string(ops::actionName(action)));
  if (!op.ok()) return errorResponse(req, op.error());
  noteActivity(id);
  setSandbox(*op, t.during, "");
  auto now = store_.getSandbox(tenant, id);
  if (now.ok() && now->has_value()) sandbox = **now;
  asio::co_spawn(io_, runAction(*op, t), asio::detached);
  return accepted(req, sandbox, *op);
}

std::optional<Error> ControlPlane::overQuota(const std::string& tenant, uint64_t memory_mib,
                                             int count_new) {
  auto lim = store_.tenantLimits(tenant);
  auto use = store_.tenantUsage(tenant);
  if (!lim.ok()) return lim.error();
  if (!use.ok()) return use.error();
  int64_t max_n = lim->max_sandboxes.value_or(policy_.tenant_max_sandboxes);
  int64_t max_mem = lim->max_memory_mib.value_or(policy_.tenant_max_memory_mib);
  if (count_new > 0 && use->sandboxes + count_new > max_n)
    return Error(Code::kResourceExhausted,
                 "quota: the tenant has " + std::to_string(use->sandboxes) + " of at most " +
                     std::to_string(max_n) +
                     " sandboxes (paused ones count); delete one or ask for a higher limit");
  if (use->memory_mib + static_cast<int64_t>(memory_mib) > max_mem)
    return Error(Code::kResourceExhausted,
                 "quota: the tenant's running sandboxes use " + std::to_string(use->memory_mib) +
                     " MiB of at most " + std::to_string(max_mem) + " MiB and this one needs " +
                     std::to_string(memory_mib) + " MiB; pause or delete one first");
  return std::nullopt;
}

Response ControlPlane::extendSandbox(const Request& req, const std::string& tenant,
                                     const std::string& id) {
  auto in = parseExtendRequest(req.body());
  if (!in.ok()) return errorResponse(req, in.error());
  auto sb = store_.getSandbox(tenant, id);
  if (!sb.ok()) return errorResponse(req, sb.error());
  if (!sb->has_value() || (*sb)->state == "deleted")
    return errorResponse(req, Error(Code::kNotFound, "sandbox " + id + " does not exist"));
  const auto& s = **sb;
  if (s.state == "deleting" || s.state == "failed") {
    json::object details{{"state", s.state}};
    return errorResponse(
        req,
        Error(Code::kFailedPrecondition, "sandbox " + id + " is " + s.state + "; cannot extend"),
        details);
  }
  int64_t now = store::nowMs();
  int64_t idle = in->timeout_s.value_or(s.idle_timeout_s);
  int64_t expires = in->lifetime_s ? now + *in->lifetime_s * 1000 : s.expires_ms;
  // The hard cap is a cap: counted from creation, whatever was asked.
  int64_t cap = s.created_ms + policy_.max_lifetime_s * 1000;
  if (expires > cap || idle > policy_.max_lifetime_s)
    return errorResponse(req,
                         Error(Code::kInvalidArgument,
                               "a sandbox lives at most " + std::to_string(policy_.max_lifetime_s) +
                                   " seconds from its creation here (until " + rfc3339(cap) + ")"));
  if (auto st = store_.setSandboxLifetime(id, idle, expires); !st.ok())
    return errorResponse(req, st.error());
  noteActivity(id);
  auto now_sb = store_.getSandbox(tenant, id);
  if (!now_sb.ok() || !now_sb->has_value())
    return errorResponse(req, Error(Code::kInternal, "sandbox " + id + " vanished"));
  return jsonResponse(req, http::status::ok, json::serialize(sandboxJson(**now_sb)));
}

void ControlPlane::noteActivity(const std::string& sandbox_id) {
  if (auto s = store_.touchSandbox(sandbox_id, store::nowMs()); !s.ok())
    log().warn("sandbox {}: {}", sandbox_id, s.error().message());
}

void ControlPlane::startReaper() {
  reap_timer_ = std::make_shared<asio::steady_timer>(io_);
  asio::co_spawn(io_, reapLoop(), asio::detached);
}

asio::awaitable<void> ControlPlane::reapLoop() {
  auto timer = reap_timer_;  // outlives this object if the io_context is torn down first
  for (;;) {
    timer->expires_after(policy_.reap_interval);
    auto [ec] = co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec || !reap_timer_) co_return;
    reapOnce();
  }
}

void ControlPlane::reapOnce() {
  int64_t now = store::nowMs();
  auto expired = store_.listExpired(now, 32);
  if (!expired.ok()) {
    log().warn("reaper: {}", expired.error().message());
    return;
  }
  for (const auto& sb : *expired) {
    auto state = ops::parseState(sb.state);
    if (!state) continue;
    // Busy sandboxes (creating, pausing, ...) are looked at again next round.
    auto t = ops::transition(*state, Action::kDelete);
    if (!t.ok()) continue;
    bool hard = sb.expires_ms > 0 && sb.expires_ms <= now;
    std::string why = hard ? "its lifetime ended at " + rfc3339(sb.expires_ms)
                           : "idle for " + std::to_string(sb.idle_timeout_s) + " s";
    auto op = newOperation(sb.tenant_id, sb.id, "delete");
    if (!op.ok()) {
      log().warn("reaper: sandbox {}: {}", sb.id, op.error().message());
      continue;
    }
    log().forSandbox(sb.id).info("expired ({}): deleting", why);
    json::object data{{"id", sb.id}, {"reason", hard ? "lifetime" : "idle"}, {"message", why}};
    publish({0, sb.tenant_id, op->id, sb.id, "sandbox.expired", json::serialize(data)});
    if (reaped_) reaped_->with({hard ? "lifetime" : "idle"}).inc();
    setSandbox(*op, t->during, "");
    asio::co_spawn(io_, runAction(*op, *t), asio::detached);
  }
}

Response ControlPlane::getOperation(const Request& req, const std::string& tenant,
                                    const std::string& id) {
  auto op = store_.getOperation(tenant, id);
  if (!op.ok()) return errorResponse(req, op.error());
  if (!op->has_value())
    return errorResponse(req, Error(Code::kNotFound, "operation " + id + " does not exist"));
  return jsonResponse(req, http::status::ok, json::serialize(operationJson(**op)));
}

Result<store::OperationRecord> ControlPlane::newOperation(const std::string& tenant,
                                                          const std::string& sandbox_id,
                                                          const std::string& kind) {
  store::OperationRecord op;
  op.id = node::newId("op");
  op.tenant_id = tenant;
  op.sandbox_id = sandbox_id;
  op.kind = kind;
  op.state = std::string(ops::opStateName(OpState::kPending));
  op.created_ms = op.updated_ms = store::nowMs();
  VESSEL_TRY(store_.insertOperation(op));
  publish({0, tenant, op.id, sandbox_id, "operation.pending", json::serialize(operationJson(op))});
  return op;
}

void ControlPlane::setOperation(store::OperationRecord& op, OpState state, const Error* error) {
  op.state = std::string(ops::opStateName(state));
  op.error_code = error ? std::string(codeName(error->code())) : "";
  op.error_message = error ? error->message() : "";
  op.updated_ms = store::nowMs();
  if (auto s = store_.setOperationState(op.id, op.state, op.error_code, op.error_message); !s.ok())
    log().error("operation {}: {}", op.id, s.error().message());
  publish({0, op.tenant_id, op.id, op.sandbox_id, "operation." + op.state,
           json::serialize(operationJson(op))});
  if (op_latency_ && (state == OpState::kDone || state == OpState::kFailed)) {
    op_latency_->with({op.kind, op.state})
        .observe(static_cast<double>(op.updated_ms - op.created_ms) / 1000.0);
    if (error) op_errors_->with({op.kind, op.error_code}).inc();
  }
}

void ControlPlane::setSandbox(const store::OperationRecord& op, SandboxState state,
                              const std::string& error) {
  std::string name(ops::stateName(state));
  if (auto s = store_.setSandboxState(op.sandbox_id, name, error); !s.ok())
    log().error("sandbox {}: {}", op.sandbox_id, s.error().message());
  // Its data-plane sessions end with it.
  if (state == SandboxState::kDeleting || state == SandboxState::kDeleted ||
      state == SandboxState::kFailed)
    if (auto n = store_.revokeSessions(op.sandbox_id); !n.ok())
      log().error("sandbox {}: revoke sessions: {}", op.sandbox_id, n.error().message());
  json::object data{{"id", op.sandbox_id}, {"state", name}};
  if (!error.empty()) data["error"] = error;
  publish({0, op.tenant_id, op.id, op.sandbox_id, "sandbox.state", json::serialize(data)});
}

void ControlPlane::publish(store::EventRecord e) {
  e.at_ms = store::nowMs();
  if (auto s = store_.appendEvent(e); !s.ok()) {
    log().error("event {} of {}: {}", e.type, e.operation_id, s.error().message());
    return;
  }
  for (auto* t : *waiters_) t->cancel();
}

asio::awaitable<void> ControlPlane::runCreate(store::OperationRecord op, std::string template_name,
                                              node::CreateOptions opts) {
  setOperation(op, OpState::kRunning, nullptr);
  auto sb = co_await runtime_.create(std::move(template_name), std::move(opts));
  if (!sb.ok()) {
    log().forSandbox(op.sandbox_id).warn("create failed: {}", sb.error().message());
    setSandbox(op, SandboxState::kFailed, sb.error().message());
    setOperation(op, OpState::kFailed, &sb.error());
    co_return;
  }
  if (network_) {
    if (auto s = network_->attach(op.tenant_id, **sb); !s.ok()) {
      // No gateway registration, no sandbox: it must not run with a network
      // other than the one asked for.
      (void)co_await runtime_.destroy(**sb);
      log().forSandbox(op.sandbox_id).warn("create failed: {}", s.error().message());
      setSandbox(op, SandboxState::kFailed, s.error().message());
      setOperation(op, OpState::kFailed, &s.error());
      co_return;
    }
  }
  live_[op.sandbox_id] = *sb;
  noteActivity(op.sandbox_id);  // the idle clock starts when it is ready
  setSandbox(op, SandboxState::kRunning, "");
  setOperation(op, OpState::kDone, nullptr);
}

asio::awaitable<void> ControlPlane::runAction(store::OperationRecord op, ops::Transition t) {
  setOperation(op, OpState::kRunning, nullptr);
  Status s = co_await doAction(op.tenant_id, op.sandbox_id, t);
  if (!s.ok()) {
    log()
        .forSandbox(op.sandbox_id)
        .warn("{} failed: {}", ops::actionName(t.action), s.error().message());
    // A failed pause or resume leaves the sandbox as it was; a failed
    // delete leaves nothing usable.
    SandboxState back = t.action == Action::kDelete ? SandboxState::kFailed : t.from;
    setSandbox(op, back, back == SandboxState::kFailed ? s.error().message() : "");
    setOperation(op, OpState::kFailed, &s.error());
    co_return;
  }
  setSandbox(op, t.done, "");
  setOperation(op, OpState::kDone, nullptr);
  if (t.action == Action::kDelete) collectTemplates();  // it may have held an old version
}

void ControlPlane::collectTemplates() {
  if (int n = templates_.collectGarbage(); n > 0)
    log().info("removed {} template version(s) no sandbox uses (a newer one exists)", n);
}

asio::awaitable<Status> ControlPlane::doAction(const std::string& tenant, const std::string& id,
                                               ops::Transition t) {
  auto it = live_.find(id);
  std::shared_ptr<node::Sandbox> sb = it == live_.end() ? nullptr : it->second;
  switch (t.action) {
    case Action::kPause: {
      if (!sb) co_return Error(Code::kUnavailable, "sandbox " + id + " has no VM on this node");
      // The gateway forgets the slot before it is released.
      if (network_) network_->detach(id);
      auto s = co_await runtime_.pause(*sb);
      if (!s.ok() && network_ && sb->state() == node::Sandbox::State::kRunning) {
        if (auto a = network_->attach(tenant, *sb); !a.ok())
          log().forSandbox(id).error("re-attach after failed pause: {}", a.error().message());
      }
      co_return s;
    }
    case Action::kResume: {
      auto r = co_await runtime_.resume(id);
      if (!r.ok()) co_return std::move(r).error();
      if (network_) {
        if (auto a = network_->attach(tenant, **r); !a.ok()) {
          (void)co_await runtime_.pause(**r);
          co_return a;
        }
      }
      live_[id] = *r;
      co_return okStatus();
    }
    case Action::kFork: break;  // forkSandbox runs its own operation
    case Action::kDelete: {
      if (!sb && t.from == SandboxState::kPaused) {
        // Paused by an earlier vesseld: bring it back to release everything
        // it holds the one way the runtime knows.
        auto r = co_await runtime_.resume(id);
        if (!r.ok()) co_return std::move(r).error();
        sb = *r;
      }
      live_.erase(id);
      if (network_) network_->detach(id);
      if (sb) co_return co_await runtime_.destroy(*sb);
      co_return okStatus();
    }
  }
  co_return Error(Code::kInternal, "unknown action");
}

}  // namespace vessel::api
