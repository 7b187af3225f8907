#include "api/data_plane_requests.h"

#include <boost/json.hpp>
#include <charconv>
#include <csignal>

#include "api/resources.h"
#include "base/env_var.h"
#include "http/json_fields.h"

namespace vessel::api {

namespace json = boost::json;

namespace {

Error bad(const std::string& what) { return badRequest(what); }

bool userName(std::string_view u) {
  if (u.empty() || u.size() > 32 || !((u[0] >= 'a' && u[0] <= 'z') || u[0] == '_')) return false;
  for (char c : u)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace

Result<std::string> guestPath(std::string_view p, const char* field) {
  if (p.empty()) return bad(std::string(field) + " is required");
  if (p[0] != '/') return bad(std::string(field) + " must be an absolute path");
  if (p.size() > agentproto::kMaxPath) return bad(std::string(field) + " is too long");
  if (p.find('\0') != std::string_view::npos) return bad(std::string(field) + " contains NUL");
  return std::string(p);
}

Result<bool> boolParam(const std::map<std::string, std::string>& q, const std::string& name,
                       bool def) {
  auto it = q.find(name);
  if (it == q.end()) return def;
  if (it->second == "true" || it->second == "1") return true;
  if (it->second == "false" || it->second == "0") return false;
  return bad(name + " must be true or false");
}

Result<uint32_t> modeParam(std::string_view s) {
  uint32_t m = 0;
  auto [p, e] = std::from_chars(s.data(), s.data() + s.size(), m, 8);
  if (s.empty() || e != std::errc() || p != s.data() + s.size() || m > 07777)
    return bad("mode must be octal, at most 7777");
  return m;
}

Result<ExecRequest> parseExecRequest(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, parseObject(body));
  ExecRequest r;
  for (const auto& [k, f] : o) {
    if (k == "cmd") {
      if (!f.is_array() || f.as_array().empty() || f.as_array().size() > agentproto::kMaxArgs)
        return bad("cmd must be a non-empty array of strings");
      for (const auto& a : f.as_array()) {
        VESSEL_ASSIGN_OR_RETURN(std::string s, strField(a, "cmd[]", agentproto::kMaxArgLen));
        if (s.find('\0') != std::string::npos) return bad("cmd[] contains NUL");
        r.spec.argv.push_back(std::move(s));
      }
      if (r.spec.argv[0].empty()) return bad("cmd[0] must not be empty");
    } else if (k == "shell") {
      VESSEL_ASSIGN_OR_RETURN(r.spec.shell, strField(f, "shell", agentproto::kMaxArgLen));
      if (r.spec.shell.empty() || r.spec.shell.find('\0') != std::string::npos)
        return bad("shell must be a non-empty command without NUL");
    } else if (k == "env") {
      if (!f.is_object() || f.as_object().size() > 256)
        return bad("env must be an object of at most 256 strings");
      for (const auto& [ek, ev] : f.as_object()) {
        if (!portableEnvName(ek))
          return bad("env: bad variable name '" + std::string(ek).substr(0, 64) + "'");
        VESSEL_ASSIGN_OR_RETURN(std::string v, strField(ev, "env." + std::string(ek), 32768));
        if (!envValue(v)) return bad("env values must not contain NUL");
        r.spec.env.push_back(std::string(ek) + "=" + v);
      }
    } else if (k == "cwd") {
      VESSEL_ASSIGN_OR_RETURN(std::string cwd, strField(f, "cwd", agentproto::kMaxPath));
      if (!cwd.empty()) {
        VESSEL_ASSIGN_OR_RETURN(r.spec.cwd, guestPath(cwd, "cwd"));
      }
    } else if (k == "user") {
      VESSEL_ASSIGN_OR_RETURN(std::string u, strField(f, "user", 32));
      if (!u.empty() && !userName(u)) return bad("user must be a user name like 'root'");
      r.spec.user = u;
    } else if (k == "pty") {
      if (f.is_bool()) {
        r.spec.pty = f.as_bool();
      } else if (f.is_object()) {
        r.spec.pty = true;
        for (const auto& [pk, pv] : f.as_object()) {
          if (pk == "rows") {
            VESSEL_ASSIGN_OR_RETURN(int64_t n, intField(pv, "pty.rows", 1, 1000));
            r.spec.rows = static_cast<uint16_t>(n);
          } else if (pk == "cols") {
            VESSEL_ASSIGN_OR_RETURN(int64_t n, intField(pv, "pty.cols", 1, 1000));
            r.spec.cols = static_cast<uint16_t>(n);
          } else {
            return bad("unknown field 'pty." + std::string(pk).substr(0, 64) + "'");
          }
        }
      } else {
        return bad("pty must be a boolean or {rows, cols}");
      }
    } else if (k == "stdin") {
      if (!f.is_bool()) return bad("stdin must be a boolean");
      r.keep_stdin = f.as_bool();
    } else if (k == "timeout_ms") {
      VESSEL_ASSIGN_OR_RETURN(int64_t n, intField(f, "timeout_ms", 0, int64_t{UINT32_MAX}));
      r.spec.timeout = std::chrono::milliseconds(n);
    } else {
      return bad("unknown field '" + std::string(k).substr(0, 64) + "'");
    }
  }
  if (r.spec.argv.empty() == r.spec.shell.empty()) return bad("give exactly one of cmd and shell");
  // A terminal's input stays open: closing it would hang up the session.
  if (r.spec.pty) r.keep_stdin = true;
  return r;
}

Result<int> parseSignalRequest(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, parseObject(body));
  if (o.size() != 1 || !o.contains("signal")) return bad("body must be {\"signal\": ...}");
  const json::value& v = o.at("signal");
  if (!v.is_string()) {
    VESSEL_ASSIGN_OR_RETURN(int64_t n, intField(v, "signal", 1, 64));
    return static_cast<int>(n);
  }
  std::string name(v.as_string());
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  static const std::pair<const char*, int> kNames[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},     {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
      {"TERM", SIGTERM}, {"USR1", SIGUSR1},   {"USR2", SIGUSR2}, {"STOP", SIGSTOP},
      {"CONT", SIGCONT}, {"WINCH", SIGWINCH}, {"ALRM", SIGALRM}, {"PIPE", SIGPIPE}};
  for (auto [n, s] : kNames)
    if (name == n) return s;
  return bad("unknown signal '" + name.substr(0, 32) + "'");
}

Result<WindowSize> parseResizeRequest(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, parseObject(body));
  WindowSize w;
  for (const auto& [k, f] : o) {
    if (k == "rows") {
      VESSEL_ASSIGN_OR_RETURN(int64_t n, intField(f, "rows", 1, 1000));
      w.rows = static_cast<uint16_t>(n);
    } else if (k == "cols") {
      VESSEL_ASSIGN_OR_RETURN(int64_t n, intField(f, "cols", 1, 1000));
      w.cols = static_cast<uint16_t>(n);
    } else {
      return bad("unknown field '" + std::string(k).substr(0, 64) + "'");
    }
  }
  if (!w.rows || !w.cols) return bad("rows and cols are required");
  return w;
}

Result<MkdirRequest> parseMkdirRequest(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, parseObject(body));
  MkdirRequest r;
  for (const auto& [k, f] : o) {
    if (k == "path") {
      VESSEL_ASSIGN_OR_RETURN(std::string p, strField(f, "path", agentproto::kMaxPath));
      VESSEL_ASSIGN_OR_RETURN(r.path, guestPath(p));
    } else if (k == "mode") {
      if (f.is_string()) {
        VESSEL_ASSIGN_OR_RETURN(r.mode, modeParam(std::string(f.as_string())));
      } else {
        VESSEL_ASSIGN_OR_RETURN(int64_t n, intField(f, "mode", 0, 07777));
        r.mode = static_cast<uint32_t>(n);
      }
    } else if (k == "parents") {
      if (!f.is_bool()) return bad("parents must be a boolean");
      r.parents = f.as_bool();
    } else {
      return bad("unknown field '" + std::string(k).substr(0, 64) + "'");
    }
  }
  if (r.path.empty()) return bad("path is required");
  return r;
}

Result<MoveRequest> parseMoveRequest(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, parseObject(body));
  MoveRequest r;
  for (const auto& [k, f] : o) {
    if (k != "from" && k != "to")
      return bad("unknown field '" + std::string(k).substr(0, 64) + "'");
    VESSEL_ASSIGN_OR_RETURN(std::string p, strField(f, std::string(k), agentproto::kMaxPath));
    VESSEL_ASSIGN_OR_RETURN(std::string g, guestPath(p, k == "from" ? "from" : "to"));
    (k == "from" ? r.from : r.to) = std::move(g);
  }
  if (r.from.empty() || r.to.empty()) return bad("from and to are required");
  return r;
}

Result<uint32_t> parsePid(std::string_view s) {
  uint32_t pid = 0;
  auto [p, e] = std::from_chars(s.data(), s.data() + s.size(), pid);
  if (s.empty() || e != std::errc() || p != s.data() + s.size() || pid == 0)
    return bad("bad process id");
  return pid;
}

json::object fileJson(const agentproto::FileStat& st, const std::string& path,
                      const std::string& name) {
  const char* type = "other";
  switch (static_cast<agentproto::FileType>(st.type)) {
    case agentproto::FileType::kFile: type = "file"; break;
    case agentproto::FileType::kDir: type = "dir"; break;
    case agentproto::FileType::kSymlink: type = "symlink"; break;
    default: break;
  }
  json::object o{{"name", name},    {"path", path},
                 {"type", type},    {"size", st.size},
                 {"mode", st.mode}, {"uid", st.uid},
                 {"gid", st.gid},   {"mtime", rfc3339(st.mtime_ns / 1000000)}};
  if (!st.link_target.empty()) o["link_target"] = st.link_target;
  return o;
}

json::object processJson(const agentclient::ProcessInfo& p) {
  return {{"pid", p.pid},
          {"running", p.running},
          {"attached", p.attached},
          {"pty", p.pty},
          {"command", p.command}};
}

std::vector<std::string> watchEventNames(uint32_t kind) {
  using W = agentproto::WatchEventMsg;
  static const std::pair<uint32_t, const char*> kBits[] = {
      {W::kCreate, "create"},        {W::kModify, "modify"},    {W::kDelete, "delete"},
      {W::kMovedFrom, "moved_from"}, {W::kMovedTo, "moved_to"}, {W::kAttrib, "attrib"},
      {W::kOverflow, "overflow"}};
  std::vector<std::string> out;
  for (auto [bit, name] : kBits)
    if (kind & bit) out.push_back(name);
  return out;
}

}  // namespace vessel::api
