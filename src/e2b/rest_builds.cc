// E2B's template builder on Vessel's builder: POST /v3/templates names a
// build, the SDK uploads each COPY's archive to the URL GET
// /templates/{id}/files/{hash} gives (a route here, behind a one-hour
// token), POST /v2/templates/{id}/builds/{buildID} starts the lifecycle's
// build of the spec toBuildSpec makes, and the status route renders the
// build operation's events as E2B's log entries. What E2B keeps per build
// (its id, the archives, tags) lives in this process: a restart forgets
// builds in progress (their templates stay). docs/e2b.md, "Template builds".
#include <sys/random.h>

#include <boost/json.hpp>
#include <charconv>
#include <chrono>
#include <deque>

#include "e2b/rest.h"
#include "e2b/template_build.h"
#include "http/json_fields.h"
#include "ops/events.h"

namespace vessel::e2b {

namespace json = boost::json;
using store::OpState;

namespace {

// An archive is the SDK's tar.gz of one COPY; it travels in the build spec
// to the node, so each is capped, and all of them together.
constexpr size_t kMaxArchives = 128 << 20, kMaxBuilds = 256, kMaxTickets = 1024;
constexpr auto kTicketLife = std::chrono::hours(1);
// A build's log as E2B entries is read whole from the store, so it is bounded.
constexpr int kMaxEvents = 20000;

std::string randomHex(size_t n) {
  unsigned char b[16];
  n = std::min(n, sizeof b);
  if (::getrandom(b, n, 0) != static_cast<ssize_t>(n)) return {};
  static const char* k = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) (s += k[b[i] >> 4]) += k[b[i] & 15];
  return s;
}

// E2B's build ids are UUIDs; the SDK only echoes them.
std::string uuid() {
  std::string h = randomHex(16);
  if (h.size() != 32) return {};
  h[12] = '4';
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Entry {
  int64_t ms;
  std::string level, message;
};

json::object entryJson(const Entry& e) {
  return json::object{
      {"timestamp", ops::rfc3339(e.ms)}, {"level", e.level}, {"message", e.message}};
}

// One stored event of the build as E2B log entries: Vessel's template.log
// (each step, each line of output, each step's end) and progress.
void appendEntries(const store::EventRecord& ev, std::vector<Entry>& out) {
  boost::system::error_code ec;
  json::value v = json::parse(ev.data_json, ec);
  if (ec || !v.is_object()) return;
  const auto& d = v.as_object();
  auto str = [&](const char* k) -> std::string {
    const auto* x = d.if_contains(k);
    return x && x->is_string() ? std::string(x->as_string()) : std::string();
  };
  if (ev.type == "template.progress") {
    out.push_back({ev.at_ms, "info", str("step")});
  } else if (ev.type == "template.log") {
    std::string kind = str("kind");
    std::string n;
    if (const auto* s = d.if_contains("step"); s && s->is_int64())
      n = std::to_string(s->as_int64());
    if (kind == "step") {
      out.push_back({ev.at_ms, "info", "[" + n + "] " + str("text")});
    } else if (kind == "done") {
      const auto* s = d.if_contains("seconds");
      double secs = s && s->is_double() ? s->as_double() : 0;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f", secs);
      out.push_back({ev.at_ms, "info", "[" + n + "] DONE " + buf + "s"});
    } else if (const auto* lines = d.if_contains("lines"); lines && lines->is_array()) {
      for (const auto& l : lines->as_array())
        if (l.is_string()) out.push_back({ev.at_ms, "info", std::string(l.as_string())});
    }
  } else if (ev.type == "template.built") {
    out.push_back({ev.at_ms, "info", "Template built"});
  }
}

bool hostHeader(std::string_view h) {
  if (h.empty() || h.size() > 255) return false;
  for (char c : h)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':' &&
        c != '[' && c != ']')
      return false;
  return true;
}

Result<uint64_t> number(const std::map<std::string, std::string>& q, const char* k, uint64_t def,
                        uint64_t max) {
  auto it = q.find(k);
  if (it == q.end()) return def;
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), n);
  if (ec != std::errc() || p != it->second.data() + it->second.size() || n > max)
    return Error(Code::kInvalidArgument,
                 std::string(k) + " must be a number up to " + std::to_string(max));
  return n;
}

}  // namespace

struct RestApi::Builds {
  struct Build {
    std::string tenant, op_id;
    BuildRequest req;
    std::vector<Entry> notes;  // Vessel's own remarks, first in the log
  };
  std::map<std::string, Build> by_id;
  std::deque<std::string> order;
  struct Ticket {
    std::string tenant, hash;
    std::chrono::steady_clock::time_point expires;
  };
  std::map<std::string, Ticket> tickets;                // by token
  using FileKey = std::pair<std::string, std::string>;  // tenant, files hash
  std::map<FileKey, std::string> files;
  std::deque<FileKey> file_order;
  size_t file_bytes = 0;
  struct Tag {
    std::string build_id;
    int64_t at_ms;
  };
  std::map<std::string, std::map<std::string, Tag>> tags;  // "tenant/name" -> tag -> build
  std::map<std::string, std::string> latest;               // "tenant/name" -> newest build

  // Keeps the newest archives within kMaxArchives (at least the one just kept).
  void keepFile(const FileKey& k, std::string content) {
    if (auto it = files.find(k); it != files.end()) file_bytes -= it->second.size();
    file_bytes += content.size();
    files[k] = std::move(content);
    file_order.push_back(k);
    while (file_bytes > kMaxArchives && file_order.size() > 1) {
      FileKey old = file_order.front();
      file_order.pop_front();
      if (old == k) continue;
      if (auto it = files.find(old); it != files.end()) {
        file_bytes -= it->second.size();
        files.erase(it);
      }
    }
  }
  // The tenant's build `build` of template `id`, or kNotFound.
  Result<Build*> find(const std::string& tenant, const std::string& id, const std::string& build) {
    auto it = by_id.find(build);
    auto name = templateName(id);
    if (it == by_id.end() || it->second.tenant != tenant || !name.ok() ||
        *name != it->second.req.name)
      return Error(Code::kNotFound, "build " + build.substr(0, 64) + " of template " +
                                        id.substr(0, 64) + " not found");
    return &it->second;
  }
};

std::shared_ptr<RestApi::Builds> RestApi::makeBuilds() { return std::make_shared<Builds>(); }

asio::awaitable<Response> RestApi::requestBuild(const Request& req, std::string tenant) {
  auto r = parseBuildRequest(req.body());
  if (!r.ok()) co_return errorJson(req, r.error());
  if (auto s = lifecycle_.templateCatalogue().checkNewName(r->name); !s.ok())
    co_return errorJson(req, s.error());
  std::string id = uuid();
  if (id.empty()) co_return errorJson(req, Error(Code::kUnavailable, "no random bytes for an id"));
  if (builds_->order.size() >= kMaxBuilds) {
    builds_->by_id.erase(builds_->order.front());
    builds_->order.pop_front();
  }
  builds_->order.push_back(id);
  json::array tags;
  for (const auto& t : r->tags) tags.push_back(json::string(t));
  if (tags.empty()) tags.push_back("default");
  json::object out{{"templateID", r->name},
                   {"buildID", id},
                   {"public", false},
                   {"names", json::array{json::string(r->name)}},
                   {"aliases", json::array{json::string(r->name)}},
                   {"tags", std::move(tags)}};
  for (const auto& t : r->tags) builds_->tags[tenant + "/" + r->name][t] = {id, nowMs()};
  builds_->latest[tenant + "/" + r->name] = id;
  builds_->by_id[id] = Builds::Build{std::move(tenant), "", std::move(*r), {}};
  co_return jsonBody(req, http::status::accepted, out);
}

Response RestApi::fileUploadLink(const Request& req, const std::string& tenant,
                                 const std::string& id, const std::string& hash) {
  auto name = templateName(id);
  if (!name.ok()) return errorJson(req, name.error());
  if (!filesHash(hash))
    return errorJson(req, Error(Code::kInvalidArgument, "the files hash must be 64 hex digits"));
  if (builds_->files.count({tenant, hash}))
    return jsonBody(req, http::status::ok, json::object{{"present", true}});
  std::string host(req[http::field::host]);
  if (!hostHeader(host))
    return errorJson(req, Error(Code::kInvalidArgument, "a Host header is needed for the URL"));
  std::string token = randomHex(16);
  if (token.empty()) return errorJson(req, Error(Code::kUnavailable, "no random bytes"));
  auto now = std::chrono::steady_clock::now();
  for (auto it = builds_->tickets.begin(); it != builds_->tickets.end();)
    it = it->second.expires < now ? builds_->tickets.erase(it) : std::next(it);
  if (builds_->tickets.size() >= kMaxTickets)
    return errorJson(req, Error(Code::kResourceExhausted, "too many uploads waiting; try later"));
  builds_->tickets[token] = Builds::Ticket{tenant, hash, now + kTicketLife};
  std::string url =
      scheme_ + "://" + host + "/templates/" + *name + "/files/" + hash + "?token=" + token;
  return jsonBody(req, http::status::created, json::object{{"present", false}, {"url", url}});
}

// The SDK PUTs without its key: the token of the URL above says whose.
asio::awaitable<Response> RestApi::uploadFiles(const Request& req, const http::Params& p,
                                               http::BodyReader& body) {
  auto q = http::parseQuery(req.target(), {"token"});
  if (!q.ok()) co_return errorJson(req, q.error());
  auto it = builds_->tickets.find(q->count("token") ? q->at("token") : "");
  if (it == builds_->tickets.end() || it->second.hash != p["hash"] ||
      it->second.expires < std::chrono::steady_clock::now())
    co_return errorJson(req, Error(Code::kUnauthenticated, "no such upload (ask for a new URL)"));
  Builds::Ticket t = it->second;
  std::string content;
  for (;;) {
    auto chunk = co_await body.next();
    if (!chunk.ok())
      co_return errorJson(req, std::move(chunk).error().withContext("upload of the COPY files"));
    if (!*chunk) break;
    content += **chunk;
  }
  builds_->tickets.erase(q->at("token"));
  builds_->keepFile({t.tenant, t.hash}, std::move(content));
  co_return jsonBody(req, http::status::ok, json::object());
}

Response RestApi::startBuild(const Request& req, const std::string& tenant, const std::string& id,
                             const std::string& build) {
  auto b = builds_->find(tenant, id, build);
  if (!b.ok()) return errorJson(req, b.error());
  Builds::Build& rec = **b;
  if (!rec.op_id.empty())
    return errorJson(req, Error(Code::kFailedPrecondition, "build " + build + " already started"));
  auto t = parseTemplateBuild(req.body());
  if (!t.ok()) return errorJson(req, t.error());
  std::string owner = tenant;
  auto spec =
      toBuildSpec(*t, rec.req, [this, owner](const std::string& hash) -> const std::string* {
        auto it = builds_->files.find({owner, hash});
        return it == builds_->files.end() ? nullptr : &it->second;
      });
  if (!spec.ok()) return errorJson(req, spec.error());
  // `force`, the build's or a step's: every step built again, none taken
  // from the step cache (a step's force rebuilds from the first step, not
  // from itself: more work, the same result).
  spec->no_cache = t->force;
  for (const auto& s : t->steps) spec->no_cache |= s.force;
  auto op = lifecycle_.buildTemplate(tenant, std::move(*spec), std::move(t->registry_auth));
  if (!op.ok()) return errorJson(req, op.error());
  rec.op_id = op->id;
  Response res{http::status::accepted, req.version()};
  res.keep_alive(req.keep_alive());
  res.prepare_payload();
  return res;
}

// Long because it is both routes' one reading of a build: the query of
// either, the operation's state and its events as E2B's entries.
Response RestApi::buildStatus(const Request& req, const std::string& tenant, const std::string& id,
                              const std::string& build, bool logs_route) {
  auto b = builds_->find(tenant, id, build);
  if (!b.ok()) return errorJson(req, b.error());
  const Builds::Build& rec = **b;
  auto q = logs_route
               ? http::parseQuery(req.target(), {"cursor", "limit", "direction", "level", "source"})
               : http::parseQuery(req.target(), {"logsOffset", "limit", "level"});
  if (!q.ok()) return errorJson(req, q.error());
  auto offset = number(*q, "logsOffset", 0, 1u << 30);
  auto limit = number(*q, "limit", logs_route ? 100 : 1u << 30, logs_route ? 100 : 1u << 30);
  auto cursor = number(*q, "cursor", 0, uint64_t{1} << 62);
  if (!offset.ok() || !limit.ok() || !cursor.ok())
    return errorJson(req, !offset.ok()  ? offset.error()
                          : !limit.ok() ? limit.error()
                                        : cursor.error());
  std::vector<Entry> all = rec.notes;
  std::string status = "waiting";
  std::optional<json::object> reason;
  if (!rec.op_id.empty()) {
    auto op = lifecycle_.getOperation(tenant, rec.op_id);
    if (!op.ok()) return errorJson(req, op.error());
    if (events_) {
      auto events = events_(tenant, rec.op_id, 0, kMaxEvents);
      if (!events.ok()) return errorJson(req, events.error());
      for (const auto& ev : *events) appendEntries(ev, all);
    }
    switch (op->state) {
      case OpState::kPending: status = "waiting"; break;
      case OpState::kRunning: status = "building"; break;
      case OpState::kDone: status = "ready"; break;
      case OpState::kFailed:
        status = "error";
        all.push_back({op->updated_ms, "error", op->error_message});
        reason = json::object{{"message", op->error_message}};
        break;
    }
  }
  std::string level = q->count("level") ? q->at("level") : "";
  auto rank = [](const std::string& l) {
    return l == "debug" ? 0 : l == "info" ? 1 : l == "warn" ? 2 : 3;
  };
  json::array entries, lines;
  std::vector<const Entry*> picked;
  for (const auto& e : all)
    if ((level.empty() || rank(e.level) >= rank(level)) && e.ms >= static_cast<int64_t>(*cursor))
      picked.push_back(&e);
  if (logs_route && q->count("direction") && q->at("direction") == "backward")
    std::reverse(picked.begin(), picked.end());
  for (size_t i = logs_route ? 0 : *offset; i < picked.size() && entries.size() < *limit; ++i) {
    entries.push_back(entryJson(*picked[i]));
    lines.push_back(json::string(picked[i]->message));
  }
  if (logs_route)
    return jsonBody(req, http::status::ok, json::object{{"logs", std::move(entries)}});
  json::object out{{"templateID", rec.req.name},
                   {"buildID", build},
                   {"status", status},
                   {"logs", std::move(lines)},
                   {"logEntries", std::move(entries)}};
  if (reason) out["reason"] = std::move(*reason);
  return jsonBody(req, http::status::ok, out);
}

// Tags are recorded per build and listed; a create still starts the newest
// version (`name:tag` other than default is refused there, docs/e2b.md).
Response RestApi::tags(const Request& req, const std::string& tenant, const std::string& id) {
  auto name = templateName(id);
  if (!name.ok()) return errorJson(req, name.error());
  json::array out;
  auto it = builds_->tags.find(tenant + "/" + *name);
  if (it != builds_->tags.end())
    for (const auto& [tag, t] : it->second)
      out.push_back(json::object{
          {"tag", tag}, {"buildID", t.build_id}, {"createdAt", ops::rfc3339(t.at_ms)}});
  return jsonBody(req, http::status::ok, out);
}

Response RestApi::assignTags(const Request& req, const std::string& tenant, bool assign) {
  auto r = parseTagsRequest(req.body(), assign);
  if (!r.ok()) return errorJson(req, r.error());
  std::string key = tenant + "/" + r->name;
  auto& tags = builds_->tags[key];
  if (!assign) {
    for (const auto& t : r->tags) tags.erase(t);
    return noContent(req);
  }
  std::string build;
  if (auto t = tags.find(r->tag); t != tags.end()) build = t->second.build_id;
  if (build.empty() && r->tag == "default" && builds_->latest.count(key))
    build = builds_->latest[key];
  if (build.empty())
    return errorJson(req, Error(Code::kNotFound, "template " + r->name + ":" + r->tag +
                                                     " not found (no build of it here)"));
  json::array names;
  for (const auto& t : r->tags) {
    tags[t] = {build, nowMs()};
    names.push_back(json::string(t));
  }
  return jsonBody(req, http::status::created,
                  json::object{{"tags", std::move(names)}, {"buildID", build}});
}

}  // namespace vessel::e2b
