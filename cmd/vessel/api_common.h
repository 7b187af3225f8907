#pragma once
// What the API commands share: a client configured from the environment,
// error reporting with one exit-code policy, following an operation to its
// end (with progress on a terminal), and printing JSON for people.
#include <boost/json/value.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "client/client.h"

namespace vessel::cli {

// Exit codes of API commands: 0 success, 1 the request or the operation
// failed (the message says why), 2 bad usage (CLI11 uses its own codes for
// unparsable arguments).
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// The client from VESSEL_API_URL and VESSEL_API_KEY (client::optionsFromEnv).
client::Client apiClient();

// Prints "vessel: <message>" on stderr and returns kExitFailed.
int fail(const Error& e);
int fail(const std::string& message);

enum class Progress {
  kNone,   // nothing
  kLines,  // one line per event on stdout (for logs and pipes)
  kBar,    // a redrawn status line with a bar on stderr (a terminal)
};
// kBar when both stdout and stderr are terminals, else `otherwise`.
Progress progressFor(Progress otherwise);

// A Dockerfile build's log entry (a template.log event's fields) as
// `docker build --progress=plain` prints its steps: "#2 [line 5] RUN make",
// "#2 <output>", "#2 DONE 1.3s".
std::vector<std::string> buildLogLines(unsigned step, unsigned line, const std::string& kind,
                                       const std::string& text,
                                       const std::vector<std::string>& lines, double seconds);

// Follows the operation's events until it ends (reconnecting with
// Last-Event-ID if the stream breaks) and returns the operation as the
// server has it at the end: its "state" is "done" or "failed".
Result<boost::json::value> waitOperation(client::Client& c, const std::string& op_id,
                                         Progress progress);

// "code: message" of a failed operation's error.
std::string operationError(const boost::json::value& op);

// JSON indented for reading (`vessel sandbox get`).
std::string prettyJson(const boost::json::value& v);

}  // namespace vessel::cli
