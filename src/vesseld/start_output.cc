#include "vesseld/start_output.h"

#include <boost/json.hpp>

#include "vesseld/console_tail.h"

namespace vessel::vesseld {

namespace json = boost::json;

void StartOutput::line(const std::string& id, State& s, uint32_t pid, bool is_err,
                       std::string_view text) {
  ops::SandboxLog* log = *log_;
  if (!log || s.lines > kMaxStartLines) return;
  bool cut = text.size() > kMaxStartLineBytes;
  json::object o{{"pid", pid}, {"stream", is_err ? "stderr" : "stdout"}};
  if (s.lines == kMaxStartLines) {
    o["line"] = "[vessel: start command lines past " + std::to_string(kMaxStartLines) +
                " are not logged; the agent keeps its newest output for a client that attaches"
                " to pid " +
                std::to_string(pid) + "]";
    o["truncated"] = true;
  } else {
    o["line"] = printableLine(text.substr(0, kMaxStartLineBytes));
    if (cut) o["truncated"] = true;
  }
  ++s.lines;
  log->append(id, ops::kLogStart, std::move(o));
}

bool StartOutput::output(const std::string& id, uint32_t pid, bool is_err, std::string_view bytes) {
  State& s = state_[id];
  std::string& partial = s.partial[is_err ? 1 : 0];
  while (!bytes.empty() && s.lines <= kMaxStartLines) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      // Kept up to one cut line's worth: the rest of a longer one is dropped.
      size_t room =
          kMaxStartLineBytes + 1 > partial.size() ? kMaxStartLineBytes + 1 - partial.size() : 0;
      partial.append(bytes.substr(0, room));
      break;
    }
    partial.append(bytes.substr(0, std::min(nl, kMaxStartLineBytes + 1)));
    line(id, s, pid, is_err, partial);
    partial.clear();
    bytes.remove_prefix(nl + 1);
  }
  return s.lines <= kMaxStartLines;
}

void StartOutput::lost(const std::string& id, uint32_t pid, uint64_t bytes) {
  ops::SandboxLog* log = *log_;
  if (!log || bytes == 0) return;
  log->append(id, ops::kLogStart, json::object{{"pid", pid}, {"lost_bytes", bytes}});
}

void StartOutput::exited(const std::string& id, uint32_t pid, const agentclient::ExitInfo& exit) {
  State& s = state_[id];
  for (int i = 0; i < 2; ++i)
    if (!s.partial[i].empty()) {
      line(id, s, pid, i == 1, s.partial[i]);
      s.partial[i].clear();
    }
  ops::SandboxLog* log = *log_;
  if (!log) return;
  json::object o{{"pid", pid}, {"event", "exit"}};
  if (exit.exited)
    o["exit_code"] = exit.code;
  else
    o["signal"] = exit.signal;
  log->append(id, ops::kLogStart, std::move(o));
}

}  // namespace vessel::vesseld
