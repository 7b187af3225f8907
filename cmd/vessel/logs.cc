// `vessel logs ID [-f] [--kind K] [--since T] [--json]`: a sandbox's log
// (docs/logs.md) as `docker logs` shows a container's: every entry so far,
// oldest first, one line each ("<time> <kind> <message>"); with -f it then
// follows new ones (SSE, resumed where it broke) until the sandbox is
// deleted. --since takes an RFC 3339 time or a duration back from now
// (30s, 10m, 2h, 1d). --json prints the API's JSON lines as they are.
#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>

#include "api/resources.h"
#include "cmd/vessel/api_common.h"
#include "cmd/vessel/commands.h"

namespace vessel::cli {

namespace json = boost::json;

namespace {

struct LogsArgs {
  std::string id, kind, since;
  bool follow = false, raw = false;
};

std::string queryEscape(std::string_view v) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : v) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// --since as RFC 3339: given so, or "<n>s|m|h|d" back from now.
Result<std::string> sinceTime(const std::string& s) {
  if (s.empty() || s.find('T') != std::string::npos) return s;
  int64_t n = 0;
  auto [p, e] = std::from_chars(s.data(), s.data() + s.size(), n);
  int64_t unit = 0;
  if (e == std::errc() && p + 1 == s.data() + s.size()) {
    switch (*p) {
      case 's': unit = 1; break;
      case 'm': unit = 60; break;
      case 'h': unit = 3600; break;
      case 'd': unit = 86400; break;
      default: break;
    }
  }
  if (unit == 0 || n < 0)
    return Error(Code::kInvalidArgument,
                 "--since must be an RFC 3339 time or a duration such as 30s, 10m, 2h, 1d");
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  return api::rfc3339(now - n * unit * 1000);
}

void print(const json::value& entry, bool raw) {
  if (raw) {
    std::printf("%s\n", json::serialize(entry).c_str());
  } else {
    std::string kind = client::str(entry, "kind");
    const json::value* data = client::field(entry, "data");
    json::object none;
    const json::object& d = data && data->is_object() ? data->as_object() : none;
    std::printf("%s %-9s %s\n", client::str(entry, "time").c_str(), kind.c_str(),
                api::logMessage(kind, d).c_str());
  }
  std::fflush(stdout);
}

// Every entry so far, a page (the API's limit) at a time.
int printAll(client::Client& c, const std::string& path, bool raw) {
  int64_t after = 0;
  for (;;) {
    auto r = c.request("GET", path + "limit=1000&after=" + std::to_string(after));
    if (!r.ok()) return fail(r.error());
    if (r->status / 100 != 2) return fail(client::errorFromResponse(*r));
    int n = 0;
    std::string_view body = r->body;
    while (!body.empty()) {
      size_t nl = body.find('\n');
      std::string_view line = body.substr(0, nl);
      body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
      if (line.empty()) continue;
      auto v = client::parseJson(line);
      if (!v.ok()) return fail(v.error());
      after = client::num(*v, "seq");
      print(*v, raw);
      ++n;
    }
    if (n < 1000) return 0;
  }
}

int follow(client::Client& c, const std::string& path, bool raw) {
  std::string last_id;
  int broken = 0;
  for (;;) {
    client::Headers h;
    if (!last_id.empty()) h.emplace_back("Last-Event-ID", last_id);
    auto s = c.stream("GET", path + "follow=true", "", h);
    if (!s.ok()) return fail(s.error());
    for (;;) {
      auto e = s->next();
      if (!e.ok()) {
        // Resumed where it broke: the entries are stored.
        if (++broken > 5) return fail(e.error());
        break;
      }
      if (!e->has_value()) return 0;  // the sandbox was deleted: its log is complete
      last_id = (*e)->id;
      auto v = client::parseJson((*e)->data);
      if (!v.ok()) return fail(v.error());
      print(*v, raw);
    }
  }
}

int runLogs(const LogsArgs& a) {
  auto since = sinceTime(a.since);
  if (!since.ok()) {
    fail(since.error());
    return kExitUsage;
  }
  // Ends in '?' or '&': each caller appends its own parameters.
  std::string base = "/v1/sandboxes/" + a.id + "/logs?";
  if (!a.kind.empty()) base += "kind=" + queryEscape(a.kind) + "&";
  if (!since->empty()) base += "since=" + queryEscape(*since) + "&";
  auto c = apiClient();
  return a.follow ? follow(c, base, a.raw) : printAll(c, base, a.raw);
}

}  // namespace

void addLogs(CLI::App& app, std::function<int()>* run) {
  auto a = std::make_shared<LogsArgs>();
  auto* l = app.add_subcommand("logs",
                               "show a sandbox's log (lifecycle, commands, console, files, "
                               "ports, egress), as docker logs");
  l->add_option("id", a->id, "sandbox id")->required();
  l->add_flag("-f,--follow", a->follow, "follow new entries until the sandbox is deleted");
  l->add_option(
      "--kind", a->kind,
      "only entries of this kind (lifecycle, command, console, file, port, egress, start)");
  l->add_option("--since", a->since, "only entries since an RFC 3339 time or a duration (10m)");
  l->add_flag("--json", a->raw, "print the API's JSON lines");
  l->callback([a, run] { *run = [a] { return runLogs(*a); }; });
}

}  // namespace vessel::cli
