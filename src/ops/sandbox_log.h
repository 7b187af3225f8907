#pragma once
// The sandbox log (docs/logs.md): a durable, bounded log per sandbox in the
// store, of what happened to it (kind "lifecycle": created from which
// template or snapshot, paused, resumed, forked, failed and why, deleted),
// of what was run in it through any front end (kind "command": who,
// the command line, user, cwd, pid, start, duration, exit, byte counts),
// of its guest's console (kind "console": kernel and agent messages, a line
// each), of the files a front end read or changed in it (kind "file": who,
// what, the path, the size) and of the connections to its ports (kind
// "port": the port, the peer, bytes each way, how long) and of what the
// egress gateway decided about its connections and lookups (kind "egress":
// the name, the port, the verdict and why), and of its template's start
// command's output (kind "start": a line each, and its exit).
// Each entry is a small JSON object of its kind's fields; writers here
// never put data, environment values or tokens into one.
//
// Bounded: each sandbox keeps its newest `max_entries` (the oldest go,
// checked every kTrimEvery appends, so a sandbox holds at most
// max_entries + kTrimEvery - 1 between checks). Kept after the sandbox
// ends for `retention`, then collected (collect(), run by the reaper).
// A failed write is logged and dropped: a log never fails a sandbox.
// Used from one io thread.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "store/store.h"

namespace vessel::ops {

namespace asio = boost::asio;

// The kinds of entries, as stored and as the API's kind= names them.
inline constexpr std::string_view kLogLifecycle = "lifecycle";
inline constexpr std::string_view kLogCommand = "command";
inline constexpr std::string_view kLogConsole = "console";
inline constexpr std::string_view kLogFile = "file";
inline constexpr std::string_view kLogPort = "port";
inline constexpr std::string_view kLogEgress = "egress";
inline constexpr std::string_view kLogStart = "start";
// Whether `kind` is one the log writes (the API refuses others). Inline:
// the API's request parsers use it without linking the lifecycle.
inline bool knownLogKind(std::string_view kind) {
  return kind == kLogLifecycle || kind == kLogCommand || kind == kLogConsole || kind == kLogFile ||
         kind == kLogPort || kind == kLogEgress || kind == kLogStart;
}
// The kinds, as an error message names them.
inline constexpr std::string_view kLogKindNames =
    "lifecycle, command, console, file, port, egress or start";

struct SandboxLogLimits {
  int max_entries = 1000;
  std::chrono::seconds retention{7 * 24 * 3600};
};

class SandboxLog {
 public:
  static constexpr int kTrimEvery = 16;

  SandboxLog(store::Store& store, const WallClock& clock);
  ~SandboxLog();
  SandboxLog(const SandboxLog&) = delete;
  SandboxLog& operator=(const SandboxLog&) = delete;

  void setLimits(const SandboxLogLimits& l) { limits_ = l; }
  // A cell holding this log until it is destroyed (then null): for writers
  // that may outlive it (the command log, held by agent clients).
  std::shared_ptr<SandboxLog*> handle() const { return self_; }
  const SandboxLogLimits& limits() const { return limits_; }

  // Stores an entry of `kind` with `data` (at the clock's now) and wakes
  // the sandbox's followers.
  void append(const std::string& sandbox_id, std::string_view kind, boost::json::object data);
  // A lifecycle entry: {"event": event, ...fields}.
  void lifecycle(const std::string& sandbox_id, std::string_view event,
                 boost::json::object fields = {});

  // Forgets the logs of sandboxes that ended more than `retention` ago;
  // returns how many entries went.
  int collect();

  // Wakes when an entry of one sandbox is appended here (entries another
  // process stores wake nobody: followers poll too, see wait()'s deadline).
  class Subscription {
   public:
    ~Subscription();
    // True when woken by an entry, false at the deadline.
    asio::awaitable<bool> wait(std::chrono::steady_clock::time_point deadline);

   private:
    friend class SandboxLog;
    struct Waiter;
    std::shared_ptr<Waiter> w_;
  };
  std::unique_ptr<Subscription> subscribe(const std::string& sandbox_id,
                                          const asio::any_io_executor& ex);

 private:
  struct Registry;
  store::Store& store_;
  const WallClock& clock_;
  SandboxLogLimits limits_;
  // Appends since each sandbox's last trim (erased when it is trimmed at
  // its end: a sandbox's log stops growing then).
  std::map<std::string, int> since_trim_;
  std::shared_ptr<Registry> subs_;
  std::shared_ptr<SandboxLog*> self_ = std::make_shared<SandboxLog*>(this);
};

// One entry as a line a person reads (`vessel logs`, E2B's log message):
// "created from template minimal (snapshot)", "failed: <why>",
// "start pid 12 as user in /: sh -c 'echo hi'", "exit 0 after 12 ms: ...",
// the console's line as it is, "write /home/user/a.txt (12 bytes) (ses-…)",
// "port 8080 from 10.0.0.1: 120 bytes in, 3400 out, 15 ms (ingress)",
// "tcp example.com:443 deny (not-allowed)".
std::string logMessage(std::string_view kind, const boost::json::object& data);
// Whether an entry reports a failure (E2B's level "error").
bool logIsError(std::string_view kind, const boost::json::object& data);

// The JSON of one entry as the API shows it (api/openapi.yaml, SandboxLogEntry):
// {"seq", "time", "kind", "data"}.
boost::json::object logEntryJson(const store::LogRecord& r);

}  // namespace vessel::ops
