#include "e2b/envd/envd.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <charconv>
#include <ctime>

#include "agentclient/guest_errors.h"
#include "e2b/envd/connect.h"
#include "e2b/envd/route.h"
#include "e2b/envd/services.h"
#include "e2b/envd/signature.h"
#include "http/json_fields.h"

namespace vessel::e2b::envd {

namespace {
constexpr std::string_view kProcessPrefix = "/process.Process/";
constexpr std::string_view kFilesystemPrefix = "/filesystem.Filesystem/";

std::string lower(std::string_view s) {
  std::string o(s);
  for (auto& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}
}  // namespace

// --- helpers ------------------------------------------------------------------

std::optional<UserInfo> userFromPasswd(std::string_view passwd, std::string_view name) {
  while (!passwd.empty()) {
    size_t nl = passwd.find('\n');
    std::string_view line = passwd.substr(0, nl);
    passwd = nl == std::string_view::npos ? std::string_view() : passwd.substr(nl + 1);
    // name:password:uid:gid:gecos:home:shell
    std::vector<std::string_view> f;
    for (size_t i = 0; f.size() < 7;) {
      size_t c = line.find(':', i);
      f.push_back(line.substr(i, c == std::string_view::npos ? std::string_view::npos : c - i));
      if (c == std::string_view::npos) break;
      i = c + 1;
    }
    if (f.size() < 7 || f[0] != name) continue;
    uint32_t uid = 0, gid = 0;
    auto num = [](std::string_view v, uint32_t& out) {
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
      return !v.empty() && ec == std::errc() && p == v.data() + v.size();
    };
    if (!num(f[2], uid) || !num(f[3], gid)) return std::nullopt;
    std::string home(f[5]);
    if (home.empty() || home[0] != '/') home = "/";
    return UserInfo{std::string(name), uid, gid, home};
  }
  return std::nullopt;
}

asio::awaitable<Result<UserInfo>> lookupUser(agentclient::AgentClient& agent,
                                             const std::string& name) {
  // The two every E2B template has, without a round trip.
  if (name == "root") co_return UserInfo{"root", 0, 0, "/root"};
  if (name == "user") co_return UserInfo{"user", 1000, 1000, "/home/user"};
  Error unknown(Code::kUnauthenticated, "error looking up user '" + name + "': unknown user");
  // A user name as useradd takes it: nothing that could reach beyond a
  // passwd line's first field.
  if (name.empty() || name.size() > 32 || name.find_first_of(":\n\r/ ") != std::string::npos ||
      name[0] == '-')
    co_return unknown;
  // The guest's passwd, read each time: users come and go in a sandbox.
  auto reader = co_await agent.readFile("/etc/passwd");
  if (!reader.ok()) co_return fromGuest(reader.error());
  std::string text;
  for (;;) {
    auto chunk = co_await (*reader)->read();
    if (!chunk.ok()) co_return fromGuest(chunk.error());
    if (!*chunk) break;
    text += **chunk;
    if (text.size() > kMaxPasswdBytes)
      co_return Error(Code::kInvalidArgument, "the guest's /etc/passwd is too large");
  }
  auto u = userFromPasswd(text, name);
  if (!u) co_return unknown;
  co_return *u;
}

asio::awaitable<Status> ensureDirs(agentclient::AgentClient& agent, const std::string& dir,
                                   const UserInfo& u) {
  auto st = co_await agent.stat(dir);
  if (st.ok()) {
    if (static_cast<agentproto::FileType>(st->type) != agentproto::FileType::kDir)
      co_return Error(Code::kInvalidArgument, "path '" + dir + "' is not a directory");
    co_return okStatus();
  }
  // As root, each missing component then given to the user, as envd does:
  // a user may write /data/x even where only root may create /data. The
  // path travels as an argument, never through the script's text.
  agentclient::ExecSpec spec;
  spec.user = "root";
  spec.argv = {"/bin/sh",
               "-c",
               "set -ef; p=; IFS=/; for c in $3; do [ -n \"$c\" ] || continue; p=\"$p/$c\"; "
               "[ -d \"$p\" ] && continue; mkdir -m 0755 -- \"$p\" || [ -d \"$p\" ]; "
               "chown \"$1:$2\" -- \"$p\"; done",
               "sh",
               std::to_string(u.uid),
               std::to_string(u.gid),
               dir};
  auto r = co_await agent.run(std::move(spec), 64 << 10);
  if (!r.ok()) co_return fromGuest(r.error());
  if (!r->exit.exited || r->exit.code != 0) {
    std::string err = r->err;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    bool bad_path =
        err.find("ot a directory") != std::string::npos || err.find("exists") != std::string::npos;
    co_return Error(bad_path ? Code::kInvalidArgument : Code::kPermissionDenied,
                    "mkdir " + dir + ": " + err);
  }
  co_return okStatus();
}

Result<std::string> resolvePath(const std::string& path, const UserInfo& u) {
  std::string p = path;
  if (p.empty()) return Error(Code::kInvalidArgument, "path is empty");
  if (p == "~")
    p = u.home;
  else if (p.rfind("~/", 0) == 0)
    p = u.home + p.substr(1);
  else if (p[0] != '/')
    p = u.home + "/" + p;
  if (p.size() > 4096 || p.find('\0') != std::string::npos)
    return Error(Code::kInvalidArgument, "path is too long or has a NUL byte");
  // Lexically clean it, as Go's filepath.Clean would.
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string::npos) j = p.size();
    std::string seg = p.substr(i, j - i);
    if (seg == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!seg.empty() && seg != ".") {
      parts.push_back(std::move(seg));
    }
    i = j + 1;
  }
  std::string out;
  for (auto& s : parts) out += "/" + s;
  return out.empty() ? std::string("/") : out;
}

Result<std::optional<std::string>> basicAuthUser(const Request& req) {
  auto it = req.find(http::field::authorization);
  if (it == req.end()) return std::optional<std::string>();
  std::string_view v = it->value();
  if (v.substr(0, 6) != "Basic ")
    return Error(Code::kUnauthenticated, "Authorization is not Basic");
  VESSEL_ASSIGN_OR_RETURN(std::string dec, base64Decode(v.substr(6)));
  auto colon = dec.find(':');
  std::string user = dec.substr(0, colon);
  if (user.empty()) return std::optional<std::string>();
  if (user.size() > 64) return Error(Code::kInvalidArgument, "user name too long");
  return std::optional<std::string>(user);
}

const json::value* field(const json::object& o, std::string_view json_name,
                         std::string_view proto_name) {
  if (auto* v = o.if_contains(json_name)) return v;
  if (!proto_name.empty())
    if (auto* v = o.if_contains(proto_name)) return v;
  return nullptr;
}

Result<std::string> stringField(const json::object& o, std::string_view json_name,
                                std::string_view proto_name) {
  auto* v = field(o, json_name, proto_name);
  if (!v || v->is_null()) return std::string();
  if (!v->is_string())
    return Error(Code::kInvalidArgument, std::string(json_name) + " is not a string");
  return std::string(v->as_string());
}

Result<json::object> parseObject(std::string_view body) {
  if (body.empty()) return json::object();
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) return Error(Code::kInvalidArgument, "request is not a JSON object");
  return std::move(v.as_object());
}

asio::awaitable<json::object> metadataOf(agentclient::AgentClient& agent, const std::string& path) {
  json::object out;
  auto attrs = co_await agent.getXattrs(path, kMetadataPrefix);
  if (attrs.ok())
    for (auto& a : *attrs) out[a.name] = a.value;
  co_return out;
}

Error fromGuest(const Error& e) { return agentclient::guestError(e); }

Response unaryOk(const Request& req, const json::object& msg) {
  return unaryOkBody(req, json::serialize(msg));
}

Response unaryOkBody(const Request& req, std::string body) {
  Response res{http::status::ok, req.version()};
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response unaryError(const Request& req, const Error& e) {
  Response res{static_cast<http::status>(connectHttpStatus(e.code())), req.version()};
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = errorJson(e);
  res.prepare_payload();
  return res;
}

Response streamError(const Request& req, const Error& e) {
  Response res{http::status::ok, req.version()};
  res.set(http::field::content_type, "application/connect+json");
  res.keep_alive(req.keep_alive());
  res.body() = endStreamEnvelope(&e);
  res.prepare_payload();
  return res;
}

Result<std::optional<std::chrono::milliseconds>> connectTimeout(const Request& req) {
  auto it = req.find("Connect-Timeout-Ms");
  if (it == req.end()) return std::optional<std::chrono::milliseconds>();
  std::string_view v = it->value();
  int64_t ms = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), ms);
  // Connect allows at most 10 digits.
  if (v.empty() || v.size() > 10 || ec != std::errc() || p != v.data() + v.size() || ms < 0)
    return Error(Code::kInvalidArgument, "Connect-Timeout-Ms is not a number of milliseconds");
  if (ms == 0) return std::optional<std::chrono::milliseconds>();
  return std::optional<std::chrono::milliseconds>(std::chrono::milliseconds(ms));
}

std::optional<std::chrono::seconds> keepaliveInterval(const Request& req) {
  auto it = req.find("Keepalive-Ping-Interval");
  if (it == req.end()) return std::nullopt;
  std::string_view v = it->value();
  int64_t s = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), s);
  if (ec != std::errc() || p != v.data() + v.size() || s <= 0) return std::nullopt;
  return std::chrono::seconds(std::min<int64_t>(s, 3600));
}

// --- routing --------------------------------------------------------------------

Result<Target> Services::target(const Request& req) {
  std::string id;
  if (auto it = req.find("E2b-Sandbox-Id"); it != req.end()) {
    id = std::string(it->value());
  } else if (auto h = sandboxFromHost(req[http::field::host])) {
    id = *h;
  }
  if (id.empty() || id.size() > 128)
    return Error(Code::kInvalidArgument,
                 "no sandbox named: send E2b-Sandbox-Id or use a 49983-<id>.<domain> host");
  // On a node, the API replica that forwarded the request checked the
  // token (access_token.h): its proof stands in for it.
  auto fwd = req.find(AccessTokens::kForwardHeader);
  if (fwd == req.end() || !tokens.forwarded(id, fwd->value())) {
    auto tok = req.find("X-Access-Token");
    if (tok == req.end()) return Error(Code::kUnauthenticated, "missing X-Access-Token");
    if (!tokens.check(id, tok->value()))
      return Error(Code::kUnauthenticated, "invalid access token for sandbox " + id);
  }
  auto agent = sandboxes.agent_of(id);
  if (!agent || agent->failure())
    return Error(Code::kUnavailable, "sandbox " + id + " is not running");
  Target t{id, std::move(agent), "user"};
  VESSEL_ASSIGN_OR_RETURN(auto user, basicAuthUser(req));
  if (user) t.user = *user;
  return t;
}

asio::awaitable<Response> Services::health(const Request& req) {
  std::string id;
  if (auto it = req.find("E2b-Sandbox-Id"); it != req.end())
    id = std::string(it->value());
  else if (auto h = sandboxFromHost(req[http::field::host]))
    id = *h;
  auto agent = id.empty() ? nullptr : sandboxes.agent_of(id);
  if (!agent || agent->failure()) {
    Response res{http::status::bad_gateway, req.version()};
    res.set(http::field::content_type, "application/json");
    res.keep_alive(req.keep_alive());
    json::object o{{"code", 502}, {"message", "sandbox " + id + " is not running"}};
    res.body() = json::serialize(o);
    res.prepare_payload();
    co_return res;
  }
  Response res{http::status::no_content, req.version()};
  res.keep_alive(req.keep_alive());
  co_return res;
}

Envd::Envd(asio::io_context& io, Sandboxes sandboxes, const AccessTokens& tokens, EnvdLimits limits)
    : s_(std::make_unique<Services>(io, std::move(sandboxes), tokens, limits)) {}

Envd::~Envd() = default;

void Envd::sandboxEnded(const std::string& id) { s_->dropSandbox(id); }

StateUsage Envd::usage() const { return s_->usage(); }

namespace {

// A request with a body is checked from its head before the body is read
// (http::HttpServer::checkHeads): the sandbox it names, and its token or
// the signature of a signed /files URL, one HMAC for that sandbox only.
std::optional<Response> checkHead(const AccessTokens& tokens, const http::request_header<>& h) {
  std::string_view target = h.target();
  std::string_view path = target.substr(0, target.find('?'));
  if (path == "/health") return std::nullopt;
  std::string id;
  if (auto it = h.find("E2b-Sandbox-Id"); it != h.end())
    id = std::string(it->value());
  else if (auto host = sandboxFromHost(h[http::field::host]))
    id = *host;
  std::optional<Error> err;
  auto fwd = h.find(AccessTokens::kForwardHeader);
  if (id.empty() || id.size() > 128) {
    err = Error(Code::kInvalidArgument,
                "no sandbox named: send E2b-Sandbox-Id or use a 49983-<id>.<domain> host");
  } else if (fwd != h.end() && tokens.forwarded(id, fwd->value())) {
    // On a node: the API replica that forwarded it checked the token or
    // signature (access_token.h); its proof stands in for them.
  } else if (auto tok = h.find("X-Access-Token"); tok != h.end()) {
    if (!tokens.check(id, tok->value()))
      err = Error(Code::kUnauthenticated, "invalid access token for sandbox " + id);
  } else if (path == "/files") {
    auto q = http::parseQuery(target, {"path", "username", "signature", "signature_expiration"});
    if (!q.ok() || !q->count("signature")) {
      err = Error(Code::kUnauthenticated, "missing X-Access-Token or signature");
    } else {
      SignedRequest sr{q->count("path") ? q->at("path") : "", "write",
                       q->count("username") ? q->at("username") : "", q->at("signature"),
                       std::nullopt};
      if (h.method() != http::verb::post) sr.operation = "read";
      if (auto e = q->find("signature_expiration"); e != q->end()) {
        auto exp = parseExpiration(e->second);
        if (exp.ok())
          sr.expiration = *exp;
        else
          err = exp.error();
      }
      if (!err) {
        Status st =
            checkFileSignature(sr, tokens.forSandbox(id), static_cast<int64_t>(std::time(nullptr)));
        if (!st.ok()) err = st.error();
      }
    }
  } else {
    err = Error(Code::kUnauthenticated, "missing X-Access-Token");
  }
  if (!err) return std::nullopt;
  Request req;
  req.base() = h;
  if (path != "/files") return unaryError(req, *err);
  int status = err->code() == Code::kInvalidArgument ? 400 : 401;
  Response res{static_cast<http::status>(status), h.version()};
  res.set(http::field::content_type, "application/json");
  json::object o{{"code", status}, {"message", err->message()}};
  res.body() = json::serialize(o);
  res.prepare_payload();
  return res;
}

}  // namespace

// envd's route table: Connect's unary and server-stream methods, /files
// and /health. What the router refuses under the Connect services and
// /files is a Connect error, as envd's own are.
void Envd::install(http::HttpServer& server) {
  Services* s = s_.get();
  server.checkHeads([s](const http::request_header<>& h) { return checkHead(s->tokens, h); });
  http::Router& r = server.router();
  for (std::string prefix :
       {std::string(kProcessPrefix), std::string(kFilesystemPrefix), std::string("/files")})
    r.errorsUnder(std::move(prefix), unaryError);
  r.get("/health", [s](const Request& req, const http::Params&) { return s->health(req); });
  const char* unary_process[] = {"List",       "SendInput", "CloseStdin",
                                 "SendSignal", "Update",    "StreamInput"};
  for (const char* m : unary_process) {
    std::string method = m;
    r.post(std::string(kProcessPrefix) + m, [s, method](const Request& req, const http::Params&) {
      return s->processUnary(req, method);
    });
  }
  const char* unary_fs[] = {
      "Stat",          "MakeDir",          "Move",         "ListDir", "Remove",
      "CreateWatcher", "GetWatcherEvents", "RemoveWatcher"};
  for (const char* m : unary_fs) {
    std::string method = m;
    r.post(std::string(kFilesystemPrefix) + m,
           [s, method](const Request& req, const http::Params&) {
             return s->filesystemUnary(req, method);
           });
  }
  // Server streams and GET /files own their connection.
  for (const char* m : {"Start", "Connect"}) {
    std::string method = m;
    r.addStream(http::verb::post, std::string(kProcessPrefix) + m,
                [s, method](const Request& req, const http::Params&, beast::tcp_stream& stream) {
                  return s->processStream(req, stream, method);
                });
  }
  r.addStream(http::verb::post, std::string(kFilesystemPrefix) + "WatchDir",
              [s](const Request& req, const http::Params&, beast::tcp_stream& stream) {
                return s->watchDir(req, stream);
              });
  r.addStream(http::verb::get, "/files",
              [s](const Request& req, const http::Params&, beast::tcp_stream& stream) {
                return s->getFile(req, stream);
              });
  r.addStream(http::verb::post, "/files",
              [s](const Request& req, const http::Params&,
                  beast::tcp_stream&) -> asio::awaitable<std::optional<Response>> {
                co_return co_await s->postFile(req);
              });
}

}  // namespace vessel::e2b::envd
