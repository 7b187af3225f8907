// The E2B REST API: routing, authentication and the sandbox routes.
// Snapshots, templates and secrets are in rest_templates.cc.
#include "e2b/rest.h"

#include <boost/json.hpp>

#include "api/auth.h"
#include "base/log.h"
#include "base/new_id.h"
#include "e2b/rule_secrets.h"
#include "ops/events.h"

namespace vessel::e2b {

namespace json = boost::json;
using store::SandboxState;

namespace {

Logger e2bLog() { return Logger("e2b"); }

// "/a/b" -> {"a", "b"}; empty segments are kept so "//" matches nothing.
std::vector<std::string> splitPath(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 1;
  while (i <= path.size() && out.size() < 8) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

bool validId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

// E2B knows two states; Vessel's transient ones show as where they lead.
bool running(SandboxState s) {
  return s == SandboxState::kRunning || s == SandboxState::kForking || s == SandboxState::kResuming;
}
bool paused(SandboxState s) { return s == SandboxState::kPaused || s == SandboxState::kPausing; }

// The key: E2B's X-API-Key, else a bearer token.
std::optional<std::string_view> apiKey(const Request& req) {
  if (auto it = req.find("X-API-Key"); it != req.end()) {
    std::string_view v = it->value();
    if (v.empty() || v.size() > 512) return std::nullopt;
    return v;
  }
  return api::bearerToken(req);
}

Error notFound(const std::string& id) {
  return Error(Code::kNotFound, "sandbox " + id + " not found");
}

}  // namespace

Response jsonBody(const Request& req, http::status status, const json::value& v) {
  return api::jsonResponse(req, status, json::serialize(v));
}

Response errorJson(const Request& req, const Error& e) {
  http::status st = api::statusForCode(e.code());
  return jsonBody(req, st, json::object{{"code", static_cast<int>(st)}, {"message", e.message()}});
}

Response noContent(const Request& req) {
  Response res{http::status::no_content, req.version()};
  res.keep_alive(req.keep_alive());
  res.prepare_payload();
  return res;
}

void RestApi::install(api::HttpServer& server) {
  server.routePrefix("/",
                     [this](const Request& req, boost::beast::tcp_stream&) { return handle(req); });
}

json::object RestApi::sandboxJson(const store::SandboxRecord& s) const {
  Ingress in = ingressFromJson(store_.getSandboxIngress(s.id).value_or(""));
  json::object o{{"sandboxID", s.id},
                 {"templateID", s.template_name},
                 {"alias", s.template_name},
                 {"clientID", "vessel"},
                 {"envdVersion", kEnvdVersion},
                 {"envdAccessToken", tokens_.forSandbox(s.id)},
                 {"trafficAccessToken", nullptr},
                 {"domain", nullptr}};
  if (!in.public_traffic) o["trafficAccessToken"] = tokens_.trafficForSandbox(s.id);
  if (!domain_.empty()) o["domain"] = domain_;
  return o;
}

json::object RestApi::listedJson(const store::SandboxRecord& s, bool detail) const {
  boost::system::error_code ec;
  json::value md = json::parse(s.metadata_json, ec);
  json::object o{
      {"sandboxID", s.id},
      {"templateID", s.template_name},
      {"alias", s.template_name},
      {"clientID", "vessel"},
      {"startedAt", ops::rfc3339(s.created_ms)},
      {"endAt",
       ops::rfc3339(s.expires_ms > 0 ? s.expires_ms
                                     : s.created_ms + lifecycle_.policy().max_lifetime_s * 1000)},
      {"cpuCount", s.vcpus},
      {"memoryMB", s.memory_mib},
      // Not tracked per sandbox; the built-in images are 1 GiB.
      {"diskSizeMB", 1024},
      {"metadata", ec || !md.is_object() ? json::object() : md.as_object()},
      {"state", paused(s.state) ? "paused" : "running"},
      {"envdVersion", kEnvdVersion}};
  if (detail) {
    o["envdAccessToken"] = tokens_.forSandbox(s.id);
    o["domain"] = domain_.empty() ? json::value(nullptr) : json::value(domain_);
    o["lifecycle"] = json::object{{"autoResume", s.auto_resume},
                                  {"onTimeout", s.pause_on_timeout ? "pause" : "kill"}};
    auto net = store_.getSandboxNetwork(s.id);
    if (net.ok() && !net->empty()) {
      json::value v = json::parse(*net, ec);
      const json::value* mode = !ec && v.is_object() ? v.as_object().if_contains("mode") : nullptr;
      if (mode && mode->is_string()) {
        bool full = mode->as_string() == "full";
        o["allowInternetAccess"] = full;
        json::object n;
        const json::value* allow = v.as_object().if_contains("allow");
        const json::value* deny = v.as_object().if_contains("deny");
        bool denies = deny && deny->is_array() && !deny->as_array().empty();
        if (!full || denies)
          n["allowOut"] = allow && allow->is_array() ? allow->as_array() : json::array();
        if (!full) n["denyOut"] = json::array{"0.0.0.0/0"};
        if (full && denies) n["denyOut"] = deny->as_array();
        o["network"] = n;
      }
    }
    Ingress in = ingressFromJson(store_.getSandboxIngress(s.id).value_or(""));
    if (in != Ingress{}) {
      if (!o.contains("network")) o["network"] = json::object();
      json::object& n = o["network"].as_object();
      n["allowPublicTraffic"] = in.public_traffic;
      if (!in.mask_host.empty()) n["maskRequestHost"] = in.mask_host;
    }
  }
  return o;
}

asio::awaitable<std::optional<Response>> RestApi::handle(const Request& req) {
  std::string path(req.target());
  if (auto q = path.find('?'); q != std::string::npos) path.resize(q);
  auto seg = splitPath(path);
  auto method = req.method();
  using V = http::verb;
  if (seg.size() == 1 && seg[0] == "health" && method == V::get)
    co_return jsonBody(req, http::status::ok, json::object{{"status", "ok"}});

  auto key = apiKey(req);
  if (!key) co_return errorJson(req, Error(Code::kUnauthenticated, "missing X-API-Key"));
  auto tenant_r = api::tenantForKey(*key, store_);
  if (!tenant_r.ok()) co_return errorJson(req, tenant_r.error());
  std::string tenant = *tenant_r;

  bool v2 = !seg.empty() && seg[0] == "v2";
  if (v2) seg.erase(seg.begin());
  auto unknown = [&]() {
    return errorJson(req, Error(Code::kNotFound, std::string(req.method_string()) + " " + path +
                                                     " is not an E2B route Vessel serves"));
  };
  if (seg.empty()) co_return unknown();

  if (seg[0] == "sandboxes") {
    if (seg.size() == 1) {
      if (method == V::post) co_return co_await create(req, tenant, v2);
      if (method == V::get) co_return list(req, tenant, v2);
      co_return unknown();
    }
    if (seg.size() == 2 && seg[1] == "metrics" && method == V::get && !v2)
      co_return jsonBody(req, http::status::ok, json::object{{"sandboxes", json::object()}});
    if (!validId(seg[1])) co_return errorJson(req, notFound(seg[1]));
    std::string id = seg[1];
    if (seg.size() == 2 && !v2) {
      if (method == V::get) {
        auto sb = lifecycle_.get(tenant, id);
        if (!sb.ok()) co_return errorJson(req, sb.error());
        if (!running(sb->state) && !paused(sb->state)) co_return errorJson(req, notFound(id));
        co_return jsonBody(req, http::status::ok, listedJson(*sb, true));
      }
      if (method == V::delete_) co_return co_await kill(req, tenant, id);
      co_return unknown();
    }
    if (seg.size() != 3) co_return unknown();
    const std::string& what = seg[2];
    if (v2) {
      if (what == "connect" && method == V::post)
        co_return co_await connect(req, tenant, id, true, false);
      co_return unknown();
    }
    if (method == V::post) {
      if (what == "pause") co_return co_await pause(req, tenant, id);
      if (what == "resume") co_return co_await connect(req, tenant, id, false, true);
      if (what == "connect") co_return co_await connect(req, tenant, id, false, false);
      if (what == "timeout") co_return setTimeout(req, tenant, id);
      if (what == "refreshes") co_return refresh(req, tenant, id);
      if (what == "fork") co_return co_await fork(req, tenant, id);
      if (what == "snapshots") co_return co_await createSnapshot(req, tenant, id);
    }
    if (what == "network" && method == V::put) co_return co_await updateNetwork(req, tenant, id);
    if (what == "metrics" && method == V::get) co_return co_await metrics(req, tenant, id);
    co_return unknown();
  }
  if (v2) co_return unknown();
  if (seg[0] == "snapshots" && seg.size() == 1 && method == V::get)
    co_return listSnapshots(req, tenant);
  if (seg[0] == "templates") {
    if (seg.size() == 1 && method == V::get) co_return listTemplates(req, tenant);
    if (seg.size() == 2 && method == V::delete_) co_return deleteTemplate(req, tenant, seg[1]);
    if (seg.size() == 3 && seg[1] == "aliases" && method == V::get)
      co_return templateAlias(req, tenant, seg[2]);
    co_return unknown();
  }
  if (seg[0] == "secrets") {
    if (seg.size() == 1 && method == V::get) co_return listSecrets(req, tenant);
    if (seg.size() == 1 && method == V::post) co_return co_await createSecret(req, tenant);
    if (seg.size() == 2) co_return co_await secret(req, tenant, seg[1]);
  }
  co_return unknown();
}

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

asio::awaitable<Result<ops::NetworkSpec>> RestApi::egressSpec(std::string tenant, const Egress& e) {
  ops::NetworkSpec spec = e.spec;
  auto made = co_await makeRuleCredentials(tenant, e, spec);
  if (!made.ok()) {
    co_await dropRuleCredentials(tenant, spec.credentials);  // those made before the failing one
    co_return std::move(made).error();
  }
  co_return spec;
}

asio::awaitable<Status> RestApi::makeRuleCredentials(std::string tenant, const Egress& e,
                                                     ops::NetworkSpec& spec) {
  for (const auto& rule : e.headers) {
    auto value = expandSecrets(rule.value, [&](const std::string& name) -> Result<std::string> {
      VESSEL_ASSIGN_OR_RETURN(auto c, store_.getCredential(tenant, name));
      // A credential bound to other hosts never goes to this one.
      if (!c || !secretServesHost(c->name, c->hosts_json, rule.host))
        return Error(Code::kInvalidArgument, "secret '" + name +
                                                 "' does not exist or is bound to "
                                                 "hosts other than " +
                                                 rule.host);
      return c->value;
    });
    if (!value.ok()) co_return std::move(value).error();
    for (char ch : *value)
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
        co_return Error(Code::kInvalidArgument,
                        "header " + rule.header + " holds control characters");
    // One credential per rule: the gateway injects it for that host only.
    // Through the lifecycle, as every credential write is, so the node
    // hears of it (ops::Node::credentialChanged).
    ops::CredentialSpec c;
    c.name = "e2b-rule-" + newId("c").substr(2);
    c.hosts = {rule.host};
    c.header = rule.header;
    c.value = *value;
    if (auto put = co_await lifecycle_.putCredential(tenant, c); !put.ok())
      co_return std::move(put).error();
    spec.credentials.push_back(c.name);
  }
  co_return okStatus();
}

asio::awaitable<void> RestApi::dropRuleCredentials(std::string tenant,
                                                   std::vector<std::string> names) {
  for (const auto& name : names)
    if (name.starts_with("e2b-rule-"))
      if (auto s = co_await lifecycle_.deleteCredential(tenant, name);
          !s.ok() && s.error().code() != Code::kNotFound)
        e2bLog().warn("delete credential {}: {}", name, s.error().message());
}

std::vector<std::string> RestApi::ruleCredentials(const std::string& tenant,
                                                  const std::string& id) {
  auto net = lifecycle_.network(tenant, id);
  if (!net.ok()) return {};
  std::vector<std::string> out;
  for (const auto& c : net->credentials)
    if (c.starts_with("e2b-rule-")) out.push_back(c);
  return out;
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
  json::object md;
  for (auto& [k, v] : in->metadata) md[k] = v;
  c.metadata_json = json::serialize(md);
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
  auto r = lifecycle_.create(c);
  // Stored before the sandbox can run: its ports follow them from the start.
  if (r.ok() && in->ingress != Ingress{}) {
    if (auto st = store_.setSandboxIngress(r->sandbox.id, ingressJson(in->ingress)); !st.ok())
      e2bLog().warn("ingress settings of {}: {}", r->sandbox.id, st.error().message());
  }
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
  // v1 has no paging: every page, up to a bound.
  for (int pages = 0; pages < (v2 ? 1 : 10); ++pages) {
    auto page = lifecycle_.list(l);
    if (!page.ok()) return errorJson(req, page.error());
    for (const auto& s : page->sandboxes) items.push_back(listedJson(s, false));
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
  auto r = lifecycle_.remove(tenant, id);
  if (!r.ok()) {
    // Already being deleted: E2B's kill of a dying sandbox is not an error.
    if (r.error().code() == Code::kFailedPrecondition) co_return noContent(req);
    co_return errorJson(req, r.error());
  }
  co_await dropRuleCredentials(tenant, rules);
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
  auto r = lifecycle_.pause(tenant, id, *memory);
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
  auto r = lifecycle_.resume(tenant, id);
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
  if (auto s = co_await lifecycle_.setNetwork(tenant, id, *spec); !s.ok()) {
    co_await dropRuleCredentials(tenant, spec->credentials);
    co_return errorJson(req, s.error());
  }
  co_await dropRuleCredentials(tenant, old);
  co_return noContent(req);
}

asio::awaitable<Response> RestApi::fork(const Request& req, std::string tenant, std::string id) {
  auto in = parseFork(req.body());
  if (!in.ok()) co_return errorJson(req, in.error());
  auto r = lifecycle_.fork(tenant, id, in->count);
  if (!r.ok()) co_return errorJson(req, r.error());
  // Copies reach their ports as their parent does.
  if (auto pi = store_.getSandboxIngress(id); pi.ok() && !pi->empty())
    for (const auto& copy : r->copies) (void)store_.setSandboxIngress(copy.id, *pi);
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
