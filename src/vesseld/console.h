#pragma once
// The web console (console/, docs/console.md) on the API listener: its
// static files under /console with a strict Content-Security-Policy, and
// the data plane relayed under /console/data/, so that a page whose
// policy allows only its own origin (connect-src 'self') can reach a
// sandbox's terminal and files. The relay forwards the data plane's own
// requests unchanged (a session token, the data plane's paths); the data
// plane authenticates them as it does any other.
#include <string>

#include "api/sessions.h"
#include "base/result.h"
#include "http/server.h"

namespace vessel::vesseld {

// The policy every console answer carries: scripts, styles and requests
// of the page's own origin only, never framed, no <base>, no forms.
inline constexpr const char* kConsoleCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
// Where the console's requests for the data plane go.
inline constexpr std::string_view kConsoleDataPrefix = "/console/data/";

// The console's directory: `flag` when set ("off": none), else the build
// tree's (<build>/console, beside cmd/) or the installed one
// (<prefix>/share/vessel/console) next to this vesseld, else "".
std::string consoleDir(const std::string& flag);

// Serves the console from `dir` on `server` and relays its data-plane
// requests to the data plane of the session's sandbox (`sessions` names
// it). An error when `dir` cannot be loaded; nothing when it is "" (no
// console: --console-dir off, or none found).
Status installConsole(http::HttpServer& server, const std::string& dir, api::Sessions& sessions);

}  // namespace vessel::vesseld
