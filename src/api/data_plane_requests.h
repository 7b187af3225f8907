#pragma once
// The data plane's untrusted input, parsed once at the edge: query strings,
// guest paths, exec requests, signals and window sizes become typed values
// or an InvalidArgument error naming the field. Also the JSON the data
// plane answers with (files, processes).
#include <boost/json/object.hpp>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "agentclient/agent_client.h"
#include "agentproto/messages.h"
#include "api/http_names.h"
#include "base/result.h"
#include "http/json_fields.h"  // parseQuery, for the data plane

namespace vessel::api {

// A guest path: absolute, at most agentproto::kMaxPath bytes, no NUL.
Result<std::string> guestPath(std::string_view p, const char* field = "path");
// "true"/"1" or "false"/"0"; `def` when absent.
Result<bool> boolParam(const std::map<std::string, std::string>& q, const std::string& name,
                       bool def);
// An octal mode like "0644" or "755" (at most 07777).
Result<uint32_t> modeParam(std::string_view s);

struct ExecRequest {
  agentclient::ExecSpec spec;
  bool keep_stdin = false;  // false: stdin is closed as soon as the process starts
};
// {"cmd": [..] | "shell": "..", "env": {}, "cwd", "user", "pty": {rows, cols} | true,
//  "stdin": bool, "timeout_ms": n}; unknown fields are errors.
Result<ExecRequest> parseExecRequest(std::string_view body);

// {"signal": "TERM" | "SIGTERM" | 15}
Result<int> parseSignalRequest(std::string_view body);
struct WindowSize {
  uint16_t rows = 0, cols = 0;
};
// {"rows": 1..1000, "cols": 1..1000}
Result<WindowSize> parseResizeRequest(std::string_view body);
struct MkdirRequest {
  std::string path;
  uint32_t mode = 0755;
  bool parents = true;
};
Result<MkdirRequest> parseMkdirRequest(std::string_view body);
struct MoveRequest {
  std::string from, to;
};
Result<MoveRequest> parseMoveRequest(std::string_view body);

// A process id in a URL path segment.
Result<uint32_t> parsePid(std::string_view s);

boost::json::object fileJson(const agentproto::FileStat& st, const std::string& path,
                             const std::string& name);
boost::json::object processJson(const agentclient::ProcessInfo& p);
// "create", "modify", ... for each bit set in a watch event's kind.
std::vector<std::string> watchEventNames(uint32_t kind);

}  // namespace vessel::api
