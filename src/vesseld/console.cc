#include "vesseld/console.h"

#include <filesystem>

#include "base/log.h"
#include "http/static_files.h"

namespace vessel::vesseld {

namespace fs = std::filesystem;

std::string consoleDir(const std::string& flag) {
  if (flag == "off") return "";
  if (!flag.empty()) return flag;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  // build/<preset>/cmd/vesseld/vesseld or <prefix>/bin/vesseld.
  for (auto p : {self.parent_path().parent_path().parent_path() / "console",
                 self.parent_path().parent_path() / "share/vessel/console"})
    if (fs::is_regular_file(p / "index.html", ec)) return p.string();
  return "";
}

namespace {

// The data plane of the sandbox the request's session token is bound to;
// nullopt (the request then reaches the console's routes, a 404) when,
// on an API replica, the token names no live session, or when the data
// plane is not plain http:// (the forwarder speaks no TLS).
std::optional<http::Upstream> dataPlaneOf(api::Sessions& sessions,
                                          const http::request_header<>& head) {
  const api::SessionOptions& o = sessions.options();
  std::string url;
  if (o.data_url_of) {
    // Many machines: the token says which node. One machine has one data
    // plane, which answers a missing or bad token itself.
    std::string_view auth = head[http::field::authorization];
    constexpr std::string_view kBearer = "Bearer ";
    if (auth.substr(0, kBearer.size()) != kBearer) return std::nullopt;
    auto bound = sessions.resolve(auth.substr(kBearer.size()));
    if (!bound.ok()) return std::nullopt;
    url = o.data_url_of(bound->sandbox_id);
  }
  if (url.empty()) url = o.data_url;
  auto up = http::upstreamFromUrl(url);
  if (!up.ok()) return std::nullopt;
  return *up;
}

}  // namespace

Status installConsole(http::HttpServer& server, const std::string& dir, api::Sessions& sessions) {
  if (dir.empty()) return okStatus();
  auto files = http::StaticFiles::load(dir);
  if (!files.ok()) return std::move(files).error().withContext("web console (--console-dir)");
  Logger("vesseld").info("web console at /console ({} files from {})", files->size(), dir);
  auto shared = std::make_shared<const http::StaticFiles>(std::move(*files));
  http::StaticFiles::Headers headers{{"Content-Security-Policy", kConsoleCsp},
                                     {"Referrer-Policy", "no-referrer"},
                                     {"X-Frame-Options", "DENY"}};
  http::StaticFiles::install(server.router(), "/console", std::move(shared), std::move(headers));
  server.forwardWhen([&sessions](http::request_header<>& head) -> std::optional<http::Upstream> {
    std::string_view target = head.target();
    if (target.substr(0, kConsoleDataPrefix.size()) != kConsoleDataPrefix) return std::nullopt;
    auto up = dataPlaneOf(sessions, head);
    if (!up) return std::nullopt;
    // "/console/data/v1/exec" is the data plane's "/v1/exec".
    std::string rest(target.substr(kConsoleDataPrefix.size() - 1));
    head.target(rest);
    return up;
  });
  return okStatus();
}

}  // namespace vessel::vesseld
