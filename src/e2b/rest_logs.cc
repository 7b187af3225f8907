// E2B's sandbox logs: GET /sandboxes/{id}/logs (v1: `logs` lines and
// `logEntries`) and GET /v2/sandboxes/{id}/logs (`logs` entries; cursor,
// direction, level, search), both from the sandbox's log in the store
// (ops/sandbox_log.h, docs/logs.md), so the SDKs' log readers see what
// happened to a sandbox and what ran in it.
#include <boost/json.hpp>
#include <charconv>

#include "e2b/rest.h"
#include "http/json_fields.h"
#include "ops/events.h"

namespace vessel::e2b {

namespace json = boost::json;

namespace {

Error bad(const std::string& what) { return Error(Code::kInvalidArgument, what); }

Result<int64_t> nonNegative(const std::string& name, const std::string& v, int64_t max) {
  int64_t n = 0;
  auto [p, e] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (e != std::errc() || p != v.data() + v.size() || n < 0 || n > max)
    return bad(name + " must be an integer from 0 to " + std::to_string(max));
  return n;
}

int levelRank(std::string_view l) {
  if (l == "debug") return 0;
  if (l == "info") return 1;
  if (l == "warn") return 2;
  if (l == "error") return 3;
  return -1;
}

// E2B's SandboxLogEntry: fields are strings (the entry's own, and its kind).
json::object entryJson(const store::LogRecord& r, const json::object& data,
                       const std::string& message) {
  json::object fields{{"kind", r.kind}, {"logger", "vessel"}};
  for (const auto& [k, v] : data) fields[k] = v.is_string() ? v : json::value(json::serialize(v));
  return {{"timestamp", ops::rfc3339(r.at_ms)},
          {"level", ops::logIsError(r.kind, data) ? "error" : "info"},
          {"message", message},
          {"fields", std::move(fields)}};
}

}  // namespace

Response RestApi::logs(const Request& req, const std::string& tenant, const std::string& id,
                       bool v2) {
  auto params =
      v2 ? http::parseQuery(req.target(), {"cursor", "limit", "direction", "level", "search"})
         : http::parseQuery(req.target(), {"start", "limit"});
  if (!params.ok()) return errorJson(req, params.error());
  store::LogQuery q;
  std::string search;
  int min_level = 0;
  for (const auto& [k, v] : *params) {
    Result<int64_t> n = int64_t{0};
    if (k == "start" || k == "cursor") {
      n = nonNegative(k, v, int64_t{1} << 50);
      if (n.ok()) q.since_ms = *n;
    } else if (k == "limit") {
      n = nonNegative(k, v, v2 ? 1000 : 100'000);
      if (n.ok()) q.limit = static_cast<int>(*n);
    } else if (k == "direction") {
      if (v != "forward" && v != "backward") n = bad("direction must be forward or backward");
      q.newest_first = v == "backward";
    } else if (k == "level") {
      min_level = levelRank(v);
      if (min_level < 0) n = bad("level must be debug, info, warn or error");
    } else if (k == "search") {
      if (v.size() > 256) n = bad("search is at most 256 characters");
      search = v;
    }
    if (!n.ok()) return errorJson(req, n.error());
  }
  if (q.newest_first) {
    // Backward from the cursor: entries at or before it, newest first.
    q.until_ms = q.since_ms;
    q.since_ms = 0;
  }
  // Filters on the message are applied after the read: read past them, up
  // to a bound, so a page is not empty merely because the newest rows did
  // not match.
  const int want = q.limit;
  if (!search.empty() || min_level > 1) q.limit = std::max(want, 1000);
  auto rows = lifecycle_.readLog(tenant, id, q);
  if (!rows.ok()) return errorJson(req, rows.error());
  json::array entries, lines;
  for (const auto& r : *rows) {
    if (static_cast<int>(entries.size()) >= want) break;
    json::error_code ec;
    json::value v = json::parse(r.data_json, ec);
    json::object data = !ec && v.is_object() ? std::move(v.as_object()) : json::object();
    std::string message = ops::logMessage(r.kind, data);
    if (!search.empty() && message.find(search) == std::string::npos) continue;
    if (min_level > 1 && !ops::logIsError(r.kind, data)) continue;  // entries are info or error
    if (!v2) lines.push_back(json::object{{"timestamp", ops::rfc3339(r.at_ms)}, {"line", message}});
    entries.push_back(entryJson(r, data, message));
  }
  if (v2) return jsonBody(req, http::status::ok, json::object{{"logs", std::move(entries)}});
  return jsonBody(req, http::status::ok,
                  json::object{{"logs", std::move(lines)}, {"logEntries", std::move(entries)}});
}

}  // namespace vessel::e2b
