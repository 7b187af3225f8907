#include "vesseld/command_log.h"

#include <boost/json.hpp>

#include "ops/events.h"

namespace vessel::vesseld {

namespace json = boost::json;

namespace {

// The command line, bounded: at most kMaxLoggedArgs arguments and
// kMaxLoggedCommandBytes in all; `cut` says whether anything was left out.
json::array commandLine(const std::vector<std::string>& argv, bool* cut) {
  json::array out;
  size_t bytes = 0;
  *cut = false;
  for (const auto& a : argv) {
    if (out.size() == kMaxLoggedArgs || bytes >= kMaxLoggedCommandBytes) {
      *cut = true;
      break;
    }
    size_t room = kMaxLoggedCommandBytes - bytes;
    if (a.size() > room) {
      out.emplace_back(a.substr(0, room));
      *cut = true;
      break;
    }
    out.emplace_back(a);
    bytes += a.size();
  }
  return out;
}

json::object common(const agentclient::CommandNote& c, std::string_view phase) {
  bool cut = false;
  json::object o{{"phase", phase},
                 {"who", c.origin},
                 {"pid", c.pid},
                 {"argv", commandLine(c.argv, &cut)},
                 {"user", c.user.empty() ? "user" : c.user},
                 {"cwd", c.cwd},
                 {"started", ops::rfc3339(c.started_ms)}};
  if (cut) o["argv_truncated"] = true;
  if (c.pty) o["pty"] = true;
  return o;
}

class CommandLog final : public agentclient::CommandObserver {
 public:
  CommandLog(std::shared_ptr<ops::SandboxLog*> log, std::string id)
      : log_(std::move(log)), id_(std::move(id)) {}

  void started(const agentclient::CommandNote& c) override {
    auto o = common(c, "start");
    // The names it set, never their values: an environment is where
    // callers put their tokens.
    if (!c.env_names.empty()) {
      json::array names;
      for (size_t i = 0; i < c.env_names.size() && i < kMaxLoggedArgs; ++i)
        names.emplace_back(c.env_names[i]);
      o["env"] = std::move(names);
    }
    write(std::move(o));
  }
  void ended(const agentclient::CommandNote& c, const agentclient::ExitInfo& e) override {
    auto o = common(c, "exit");
    o["duration_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - c.started)
                           .count();
    if (e.exited)
      o["exit_code"] = e.code;
    else
      o["signal"] = e.signal;
    if (e.timed_out) o["timed_out"] = true;
    o["bytes_in"] = c.bytes_in;
    o["bytes_out"] = c.bytes_out;
    write(std::move(o));
  }

  void file(const agentclient::FileNote& f) override {
    json::object o{{"who", f.origin}, {"op", f.op}, {"path", boundedPath(f.path)}};
    if (!f.to.empty()) o["to"] = boundedPath(f.to);
    if (f.size) o["size"] = *f.size;
    write(std::move(o), ops::kLogFile);
  }
  void port(const agentclient::PortNote& p) override {
    json::object o{{"who", p.origin},
                   {"port", p.port},
                   {"peer", p.peer},
                   {"started", ops::rfc3339(p.started_ms)},
                   {"duration_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now() - p.started)
                                       .count()},
                   {"bytes_in", p.bytes_in},
                   {"bytes_out", p.bytes_out}};
    write(std::move(o), ops::kLogPort);
  }

 private:
  // A guest path as a front end named it, cut at the command line's bound.
  static std::string boundedPath(const std::string& p) {
    return p.size() > kMaxLoggedCommandBytes ? p.substr(0, kMaxLoggedCommandBytes) + "…" : p;
  }
  void write(json::object o, std::string_view kind = ops::kLogCommand) {
    if (ops::SandboxLog* l = *log_) l->append(id_, kind, std::move(o));
  }
  std::shared_ptr<ops::SandboxLog*> log_;
  std::string id_;
};

}  // namespace

std::shared_ptr<agentclient::CommandObserver> commandLog(const ops::SandboxLog& log,
                                                         std::string sandbox_id) {
  return std::make_shared<CommandLog>(log.handle(), std::move(sandbox_id));
}

}  // namespace vessel::vesseld
