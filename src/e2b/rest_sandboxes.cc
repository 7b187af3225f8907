// The E2B REST API's sandbox routes. The route table is rest.cc's;
// snapshots, templates and secrets are in rest_templates.cc.
#include <boost/json.hpp>

#include "e2b/rest.h"
#include "e2b/rest_states.h"
#include "ops/events.h"

namespace vessel::e2b {

namespace json = boost::json;
using store::SandboxState;

asio::awaitable<Status> RestApi::finish(const std::string& tenant,
                                        const store::OperationRecord& op) {
  auto done = co_await lifecycle_.awaitOperation(
      tenant, op.id, std::chrono::steady_clock::now() + opts_.await_limit);
  if (!done.ok()) co_return done.error();
  if (done->state == store::OpState::kDone) co_return okStatus();
  Code code = Code::kInternal;
  if (done->error_code == "not_found") code = Code::kNotFound;
  if (done->error_code == "resource_exhausted") code = Code::kResourceExhausted;
  if (done->error_code == "unavailable") code = Code::kUnavailable;
  co_return Error(code, op.kind + " of " + op.sandbox_id + " failed: " + done->error_message);
}

asio::awaitable<Response> RestApi::create(const Request& req, std::string tenant, bool v2) {
  auto in = parseNewSandbox(req.body(), v2);
  if (!in.ok()) co_return errorJson(req, in.error());
  auto name = templateName(in->template_id);
  if (!name.ok()) co_return errorJson(req, name.error());
  ops::CreateRequest c;
  c.tenant = tenant;
  c.template_name = *name;
  c.env = std::move(in->env);
  c.metadata = std::move(in->metadata);
  // E2B's timeout is a lifetime counted from now; nothing idles out.
  c.timeout_s = 0;
  c.lifetime_s = std::max<int64_t>(in->timeout_s, 1);
  c.pause_on_timeout = in->auto_pause;
  c.pause_memory = in->auto_pause_memory;
  c.auto_resume = in->auto_resume;
  if (in->egress) {
    auto spec = co_await egressSpec(tenant, *in->egress);
    if (!spec.ok()) co_return errorJson(req, spec.error());
    c.network = std::move(*spec);
  }
  // Stored with the sandbox, in its create's transaction: its ports follow
  // them from the start, and its forks keep them.
  c.ingress = in->ingress;
  // volumeMounts: the tenant's volumes by name, mounted read-write once it
  // runs (the lifecycle resolves them: 404 for one the tenant has not).
  for (auto& m : in->volumes)
    c.volumes.push_back({"", std::move(m.name), std::move(m.path), false});
  auto r = lifecycle_.operations().forRequest(std::string(req["X-Request-Id"]),
                                              [&] { return lifecycle_.create(c); });
  if (!r.ok()) {
    // Refused before it existed: the rules' credentials go too.
    if (c.network) co_await dropRuleCredentials(tenant, c.network->credentials);
    co_return errorJson(req, r.error());
  }
  if (auto s = co_await finish(tenant, r->operation); !s.ok()) co_return errorJson(req, s.error());
  auto sb = lifecycle_.get(tenant, r->sandbox.id);
  if (!sb.ok()) co_return errorJson(req, sb.error());
  co_return jsonBody(req, http::status::created, sandboxJson(*sb));
}

Response RestApi::list(const Request& req, const std::string& tenant, bool v2) {
  auto q = parseListQuery(req.target(), v2);
  if (!q.ok()) return errorJson(req, q.error());
  ops::ListRequest l;
  l.tenant = tenant;
  l.page_size = v2 ? q->limit : 100;
  l.page_token = q->next_token;
  l.metadata = q->metadata;
  for (auto st : q->states) {
    l.states.insert(st);
    if (st == SandboxState::kRunning) {
      l.states.insert(SandboxState::kForking);
      l.states.insert(SandboxState::kResuming);
    }
    if (st == SandboxState::kPaused) l.states.insert(SandboxState::kPausing);
  }
  l.created_after_ms = q->started_after_ms;
  if (!q->template_id.empty()) {
    auto name = templateName(q->template_id);
    if (!name.ok()) return errorJson(req, name.error());
    l.template_name = *name;
  }
  l.order = q->newest_first ? ops::ListRequest::Order::kNewestFirst
                            : ops::ListRequest::Order::kOldestFirst;
  json::array items;
  std::string next;
  auto mounts = mountsOf(tenant);  // one read for the whole list
  // v1 has no paging: every page, up to a bound.
  for (int pages = 0; pages < (v2 ? 1 : 10); ++pages) {
    auto page = lifecycle_.list(l);
    if (!page.ok()) return errorJson(req, page.error());
    for (const auto& s : page->sandboxes) {
      json::object o = listedJson(s, false);
      o["volumeMounts"] = volumeMountsJson(mounts[s.id]);
      items.push_back(std::move(o));
    }
    next = page->next_page_token;
    if (next.empty()) break;
    l.page_token = next;
  }
  Response res = jsonBody(req, http::status::ok, items);
  if (v2 && !next.empty()) res.set("X-Next-Token", next);
  return res;
}

asio::awaitable<Response> RestApi::kill(const Request& req, std::string tenant, std::string id) {
  auto sb = lifecycle_.get(tenant, id);
  if (!sb.ok()) co_return errorJson(req, sb.error());
  if (sb->state == SandboxState::kFailed) co_return errorJson(req, notFound(id));
  auto rules = ruleCredentials(tenant, id);  // read while the sandbox is there
  auto r = lifecycle_.operations().forRequest(std::string(req["X-Request-Id"]),
                                              [&] { return lifecycle_.remove(tenant, id); });
  if (!r.ok()) {
    // Already being deleted: E2B's kill of a dying sandbox is not an error.
    if (r.error().code() == Code::kFailedPrecondition) co_return noContent(req);
    co_return errorJson(req, r.error());
  }
  co_await dropRuleCredentials(tenant, rules, id);
  if (auto s = co_await finish(tenant, r->operation); !s.ok()) co_return errorJson(req, s.error());
  co_return noContent(req);
}

asio::awaitable<Response> RestApi::pause(const Request& req, std::string tenant, std::string id) {
  auto memory = parsePause(req.body());
  if (!memory.ok()) co_return errorJson(req, memory.error());
  auto sb = lifecycle_.get(tenant, id);
  if (!sb.ok()) co_return errorJson(req, sb.error());
  if (paused(sb->state))
    co_return errorJson(req, Error(Code::kAlreadyExists, "sandbox " + id + " is already paused"));
  if (!running(sb->state)) co_return errorJson(req, notFound(id));
  // memory: false keeps only the filesystem; connect boots it again.
  auto r = lifecycle_.operations().forRequest(
      std::string(req["X-Request-Id"]), [&] { return lifecycle_.pause(tenant, id, *memory); });
  if (!r.ok()) co_return errorJson(req, r.error());
  if (auto s = co_await finish(tenant, r->operation); !s.ok()) co_return errorJson(req, s.error());
  // E2B keeps paused sandboxes until they are resumed or killed: here, until
  // the deployment's lifetime cap (counted from creation).
  int64_t cap = sb->created_ms + lifecycle_.policy().max_lifetime_s * 1000;
  int64_t left = (cap - lifecycle_.clock().nowMs()) / 1000;
  if (left > 0) (void)lifecycle_.extend(tenant, id, 0, left);
  co_return noContent(req);
}

asio::awaitable<Response> RestApi::connect(const Request& req, std::string tenant, std::string id,
                                           bool v2, bool resume_only) {
  auto timeout = resume_only ? parseResume(req.body()) : parseConnect(req.body(), v2);
  if (!timeout.ok()) co_return errorJson(req, timeout.error());
  auto sb = lifecycle_.get(tenant, id);
  if (!sb.ok()) co_return errorJson(req, sb.error());
  // A pause or resume in flight (an auto-pause at its timeout, say) ends
  // first: E2B's connect lands on a paused or running sandbox.
  if (sb->state == SandboxState::kPausing || sb->state == SandboxState::kResuming)
    sb = co_await lifecycle_.settled(tenant, id,
                                     std::chrono::steady_clock::now() + opts_.await_limit);
  if (!sb.ok()) co_return errorJson(req, sb.error());
  if (running(sb->state)) {
    if (resume_only)
      co_return errorJson(req,
                          Error(Code::kAlreadyExists, "sandbox " + id + " is already running"));
    // Running: the timeout is only ever extended.
    auto r = lifecycle_.extendAtLeast(tenant, id, *timeout);
    if (!r.ok()) co_return errorJson(req, r.error());
    co_return jsonBody(req, http::status::ok, sandboxJson(*r));
  }
  if (!paused(sb->state)) co_return errorJson(req, notFound(id));
  auto r = lifecycle_.operations().forRequest(std::string(req["X-Request-Id"]),
                                              [&] { return lifecycle_.resume(tenant, id); });
  if (!r.ok()) co_return errorJson(req, r.error());
  if (auto s = co_await finish(tenant, r->operation); !s.ok()) co_return errorJson(req, s.error());
  auto now = lifecycle_.extend(tenant, id, 0, std::max<int64_t>(*timeout, 1));
  if (!now.ok()) co_return errorJson(req, now.error());
  co_return jsonBody(req, http::status::created, sandboxJson(*now));
}

Response RestApi::setTimeout(const Request& req, const std::string& tenant, const std::string& id) {
  auto t = parseTimeout(req.body());
  if (!t.ok()) return errorJson(req, t.error());
  auto sb = lifecycle_.get(tenant, id);
  if (!sb.ok()) return errorJson(req, sb.error());
  if (!running(sb->state) && !paused(sb->state)) return errorJson(req, notFound(id));
  // Counted from now, longer or shorter (0: at once).
  auto r = lifecycle_.extend(tenant, id, 0, *t);
  if (!r.ok()) return errorJson(req, r.error());
  return noContent(req);
}

Response RestApi::refresh(const Request& req, const std::string& tenant, const std::string& id) {
  auto d = parseRefresh(req.body());
  if (!d.ok()) return errorJson(req, d.error());
  auto r = lifecycle_.extendAtLeast(tenant, id, *d);
  if (!r.ok()) return errorJson(req, r.error());
  return noContent(req);
}

asio::awaitable<Response> RestApi::updateNetwork(const Request& req, std::string tenant,
                                                 std::string id) {
  auto e = parseNetworkUpdate(req.body());
  if (!e.ok()) co_return errorJson(req, e.error());
  auto sb = lifecycle_.get(tenant, id);
  if (!sb.ok()) co_return errorJson(req, sb.error());
  if (!running(sb->state) && !paused(sb->state)) co_return errorJson(req, notFound(id));
  // The rules' old credentials go once the new settings are in place.
  auto old = ruleCredentials(tenant, id);
  auto spec = co_await egressSpec(tenant, *e);
  if (!spec.ok()) co_return errorJson(req, spec.error());
  if (auto s = co_await lifecycle_.egress().setNetwork(tenant, id, *spec); !s.ok()) {
    co_await dropRuleCredentials(tenant, spec->credentials);
    co_return errorJson(req, s.error());
  }
  co_await dropRuleCredentials(tenant, old);
  co_return noContent(req);
}

asio::awaitable<Response> RestApi::fork(const Request& req, std::string tenant, std::string id) {
  auto in = parseFork(req.body());
  if (!in.ok()) co_return errorJson(req, in.error());
  auto r = lifecycle_.operations().forRequest(
      std::string(req["X-Request-Id"]), [&] { return lifecycle_.fork(tenant, id, in->count); });
  if (!r.ok()) co_return errorJson(req, r.error());
  Status s = co_await finish(tenant, r->operation);
  json::array out;
  for (const auto& copy : r->copies) {
    auto c = lifecycle_.get(tenant, copy.id);
    if (c.ok() && c->state == SandboxState::kRunning) {
      // A copy keeps its parent's expiry; a timeout may only shorten it.
      if (in->timeout_s) {
        int64_t want = lifecycle_.clock().nowMs() + *in->timeout_s * 1000;
        if (c->expires_ms == 0 || want < c->expires_ms)
          (void)lifecycle_.extend(tenant, copy.id, 0, std::max<int64_t>(*in->timeout_s, 1));
      }
      out.push_back(json::object{{"sandbox", sandboxJson(*c)}});
      continue;
    }
    std::string why = c.ok() ? c->error : c.error().message();
    if (why.empty() && !s.ok()) why = s.error().message();
    out.push_back(json::object{
        {"error", json::object{{"code", 500}, {"message", "fork copy failed: " + why}}}});
  }
  if (!s.ok() && out.empty()) co_return errorJson(req, s.error());
  co_return jsonBody(req, http::status::created, out);
}

asio::awaitable<Response> RestApi::metrics(const Request& req, std::string tenant, std::string id) {
  auto sb = lifecycle_.get(tenant, id);
  if (!sb.ok()) co_return errorJson(req, sb.error());
  if (!running(sb->state) && !paused(sb->state)) co_return errorJson(req, notFound(id));
  auto range = parseMetricsRange(req.target());
  if (!range.ok()) co_return errorJson(req, range.error());
  json::array out;
  // One sample, taken now (Vessel keeps no history); none while paused or
  // when now is outside the range asked for (give or take E2B's 5 s buckets).
  int64_t now = lifecycle_.clock().nowMs();
  constexpr int64_t kBucketS = 5;
  if ((range->first && now / 1000 < *range->first - kBucketS) ||
      (range->second && now / 1000 > *range->second + kBucketS))
    co_return jsonBody(req, http::status::ok, out);
  auto u = co_await lifecycle_.usage(tenant, id);
  if (u.ok()) {
    out.push_back(json::object{{"timestamp", ops::rfc3339(now)},
                               {"timestampUnix", now / 1000},
                               {"cpuCount", u->cpu_count},
                               {"cpuUsedPct", u->cpu_used_pct},
                               {"memUsed", u->mem_used_bytes},
                               {"memTotal", u->mem_total_bytes},
                               {"memCache", 0},
                               {"diskUsed", u->disk_used_bytes},
                               {"diskTotal", u->disk_total_bytes}});
  } else if (u.error().code() != Code::kFailedPrecondition) {
    co_return errorJson(req, u.error());
  }
  co_return jsonBody(req, http::status::ok, out);
}

}  // namespace vessel::e2b
