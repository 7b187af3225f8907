#include "api/sessions.h"

#include <boost/json.hpp>

#include "api/auth.h"
#include "api/resources.h"
#include "base/log.h"
#include "base/sha256.h"

namespace vessel::api {

namespace json = boost::json;

namespace {

const Logger& log() {
  static const Logger l("sessions");
  return l;
}

Error bad(const std::string& what) { return Error(Code::kInvalidArgument, what); }

}  // namespace

Result<SessionRequest> parseSessionRequest(std::string_view body, const SessionOptions& opts) {
  SessionRequest r;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return r;
  json::parse_options po;
  po.max_depth = 4;
  boost::system::error_code ec;
  json::value v = json::parse(body, ec, {}, po);
  if (ec) return bad("body is not valid JSON: " + ec.message());
  if (!v.is_object()) return bad("body must be a JSON object");
  for (const auto& [k, f] : v.as_object()) {
    if (k != "ttl_seconds") return bad("unknown field '" + std::string(k) + "'");
    int64_t max = opts.max_ttl.count();
    if (!f.is_int64() || f.as_int64() < 1 || f.as_int64() > max)
      return bad("ttl_seconds must be an integer between 1 and " + std::to_string(max));
    r.ttl = std::chrono::seconds(f.as_int64());
  }
  return r;
}

Result<std::string> newSessionToken() { return randomToken("vst_"); }

Result<SessionGrant> Sessions::issue(const std::string& tenant, const std::string& sandbox_id,
                                     std::chrono::seconds ttl, std::string* state) {
  VESSEL_ASSIGN_OR_RETURN(auto sb, store_.getSandbox(tenant, sandbox_id));
  if (!sb || sb->state == store::SandboxState::kDeleted)
    return Error(Code::kNotFound, "sandbox " + sandbox_id + " does not exist");
  if (sb->state != store::SandboxState::kRunning) {
    std::string st(store::stateName(sb->state));
    if (state) *state = st;
    return Error(Code::kFailedPrecondition,
                 "sandbox " + sandbox_id + " is " + st + ", not running");
  }
  // Expired sessions are forgotten lazily, here, rather than by a timer.
  if (auto n = store_.deleteExpiredSessions(clock_.nowMs()); !n.ok())
    log().warn("forget expired sessions: {}", n.error().message());
  VESSEL_ASSIGN_OR_RETURN(std::string token, newSessionToken());
  store::SessionRecord rec;
  rec.token_sha256 = sha256Hex(token);
  rec.tenant_id = tenant;
  rec.sandbox_id = sandbox_id;
  rec.created_ms = clock_.nowMs();
  if (ttl.count() <= 0) ttl = opts_.default_ttl;
  rec.expires_ms = rec.created_ms + ttl.count() * 1000;
  VESSEL_TRY(store_.insertSession(rec));
  std::string url = opts_.data_url_of ? opts_.data_url_of(sandbox_id) : "";
  if (url.empty()) url = opts_.data_url;
  return SessionGrant{std::move(token), sandbox_id, std::move(url), rec.expires_ms};
}

Response Sessions::create(const Request& req, const std::string& tenant,
                          const std::string& sandbox_id) {
  auto in = parseSessionRequest(req.body(), opts_);
  if (!in.ok()) return errorResponse(req, in.error());
  std::string state;
  auto g = issue(tenant, sandbox_id, in->ttl, &state);
  if (!g.ok()) {
    if (!state.empty()) return errorResponse(req, g.error(), json::object{{"state", state}});
    return errorResponse(req, g.error());
  }
  json::object o{{"data_url", g->data_url},
                 {"token", g->token},
                 {"sandbox_id", g->sandbox_id},
                 {"expires_at", rfc3339(g->expires_ms)}};
  return jsonResponse(req, http::status::created, json::serialize(o));
}

Result<Sessions::Bound> Sessions::authenticate(const Request& req, std::string* state) {
  auto token = bearerToken(req);
  if (!token) return Error(Code::kUnauthenticated, "missing or invalid session token");
  return resolve(*token, state);
}

Result<Sessions::Bound> Sessions::resolve(std::string_view token, std::string* state) {
  Error denied(Code::kUnauthenticated, "missing or invalid session token");
  auto s = store_.sessionForToken(sha256Hex(token));
  if (!s.ok()) return std::move(s).error().withContext("authenticate session");
  if (!s->has_value()) return denied;
  const store::SessionRecord& rec = **s;
  if (rec.expires_ms <= clock_.nowMs())
    return Error(Code::kUnauthenticated, "session token expired at " + rfc3339(rec.expires_ms));
  // Scoped by the session's own tenant: a token never reaches a sandbox its
  // tenant does not own, whatever the sessions table says.
  auto sb = store_.getSandbox(rec.tenant_id, rec.sandbox_id);
  if (!sb.ok()) return std::move(sb).error().withContext("authenticate session");
  using store::SandboxState;
  if (!sb->has_value() || (*sb)->state == SandboxState::kDeleted ||
      (*sb)->state == SandboxState::kDeleting || (*sb)->state == SandboxState::kFailed)
    return Error(Code::kUnauthenticated, "session revoked: its sandbox has ended");
  if ((*sb)->state != SandboxState::kRunning) {
    std::string st(store::stateName((*sb)->state));
    if (state) *state = st;
    return Error(Code::kFailedPrecondition,
                 "sandbox " + rec.sandbox_id + " is " + st + ", not running");
  }
  return Bound{rec.tenant_id, rec.sandbox_id, "ses-" + rec.token_sha256.substr(0, 12)};
}

}  // namespace vessel::api
