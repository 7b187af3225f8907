#pragma once
// What `vessel exec`, `vessel shell` and `vessel cp` share: a data-plane
// session for one sandbox (POST /v1/sandboxes/{id}/sessions through the
// control plane, then a client for the data plane with the session's token),
// and the exit-code policy of commands that pass a remote exit code through.
#include <string>

#include "base/result.h"
#include "client/client.h"

namespace vessel::cli {

// Exit codes of vessel itself where a command's own code passes through
// (docker's convention): 125 vessel failed, 126 the command could not be
// run, 127 it was not found.
constexpr int kExitVesselFailed = 125;
constexpr int kExitCannotRun = 126;
constexpr int kExitNotFound = 127;

struct DataSession {
  std::string sandbox_id;
  client::Client data;  // the data plane, authenticated with the session token
};

// A session on `sandbox_id` valid for `ttl_seconds` (0: the server's
// default). The control plane comes from VESSEL_API_URL/VESSEL_API_KEY; the
// data plane's URL from the session, or VESSEL_DATA_URL when set (a server
// reached through a tunnel hands out a URL that is not this machine's).
// `max_response_bytes` bounds a whole response (a downloaded file).
Result<DataSession> openSession(const std::string& sandbox_id, int ttl_seconds = 0,
                                size_t max_response_bytes = 64 << 20);

// Percent-encodes a guest path for a query string.
std::string queryEscape(std::string_view s);

// Prints "vessel: <message>" on stderr and returns `code`.
int report(const Error& e, int code);

}  // namespace vessel::cli
