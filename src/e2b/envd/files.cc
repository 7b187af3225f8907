// GET and POST /files (envd.yaml): downloads streamed from the agent, gzip
// on request; uploads as multipart/form-data (one part per file, its
// filename the path) or application/octet-stream, gzip-encoded or not.
// Signed URLs (signature.h) stand in for the access token and may arrive
// without naming their sandbox: the signature then says which it is.
#include <boost/beast/http/empty_body.hpp>
#include <boost/json/serialize.hpp>
#include <ctime>

#include "base/log.h"
#include "base/scope_exit.h"
#include "e2b/envd/gzip.h"
#include "e2b/envd/multipart.h"
#include "e2b/envd/route.h"
#include "e2b/envd/services.h"
#include "e2b/envd/signature.h"
#include "http/headers.h"
#include "http/json_fields.h"
#include "http/stream.h"

namespace vessel::e2b::envd {

namespace {

constexpr auto kWriteTimeout = std::chrono::seconds(30);
// Uploads go to the agent in pieces of this size (inflated ones too).
constexpr size_t kUploadPiece = 1 << 20;

const Logger& log() {
  static const Logger l("envd");
  return l;
}

// envd's /files errors: {"code": <http status>, "message"}.
Response filesError(const Request& req, const Error& e) {
  int status = 500;
  switch (e.code()) {
    case Code::kInvalidArgument:
    case Code::kFailedPrecondition: status = 400; break;
    case Code::kUnauthenticated:
    case Code::kPermissionDenied: status = 401; break;
    case Code::kNotFound: status = 404; break;
    case Code::kUnavailable: status = 502; break;
    case Code::kResourceExhausted: status = 507; break;
    default: status = 500;
  }
  Response res{static_cast<http::status>(status), req.version()};
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  json::object o{{"code", status}, {"message", e.message()}};
  res.body() = json::serialize(o);
  res.prepare_payload();
  return res;
}

bool acceptsGzip(const Request& req) {
  auto it = req.find(http::field::accept_encoding);
  if (it == req.end()) return false;
  std::string v(it->value());
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v.find("gzip") != std::string::npos;
}

// All of a gzip body, refused past `cap` bytes inflated.
Result<std::string> inflateAll(std::string_view body, size_t cap) {
  Inflater in(body);
  std::string out;
  while (!in.done()) {
    VESSEL_ASSIGN_OR_RETURN(std::string piece, in.next(kUploadPiece));
    out += piece;
    if (out.size() > cap)
      return Error(Code::kResourceExhausted, "gzip body inflates past the upload limit");
  }
  return out;
}

bool printable(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

// `X-Metadata-<key>: <value>` headers as envd.yaml has them: keys
// lowercased, printable ASCII, a key at most 246 bytes, at most 4096 bytes
// in all (the prefix counted per key), the first of a repeated key wins.
Result<std::vector<agentproto::Xattr>> metadataHeaders(const Request& req) {
  std::vector<agentproto::Xattr> out;
  size_t total = 0;
  for (const auto& h : req) {
    std::string_view n = h.name_string();
    if (n.size() <= 11 || strncasecmp(n.data(), "X-Metadata-", 11) != 0) continue;
    std::string key(n.substr(11));
    for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view value = h.value();
    if (!printable(key) || !printable(value))
      return Error(Code::kInvalidArgument, "metadata keys and values must be printable ASCII");
    if (key.size() > 246)
      return Error(Code::kInvalidArgument, "metadata key longer than 246 bytes");
    bool seen = false;
    for (const auto& a : out) seen = seen || a.name == key;
    if (seen) continue;
    total += std::string_view(kMetadataPrefix).size() + key.size() + value.size();
    if (total > 4096) return Error(Code::kInvalidArgument, "metadata larger than 4096 bytes");
    out.push_back({std::move(key), std::string(value)});
  }
  return out;
}

}  // namespace

// The target of a /files request: by header or Host and token, else by a
// signature (which also proves access).
static Result<Target> filesTarget(Services& s, const Request& req,
                                  const std::map<std::string, std::string>& q,
                                  const char* operation) {
  auto sig = q.find("signature");
  if (sig == q.end()) return s.target(req);
  SignedRequest sr;
  sr.path = q.count("path") ? q.at("path") : "";
  sr.operation = operation;
  sr.user = q.count("username") ? q.at("username") : "";
  sr.signature = sig->second;
  if (auto e = q.find("signature_expiration"); e != q.end()) {
    VESSEL_ASSIGN_OR_RETURN(int64_t exp, parseExpiration(e->second));
    sr.expiration = exp;
  }
  if (!s.tokens.hasKey()) {
    // A node: only the API replica can check a signature, and vouches for
    // the sandbox it found (access_token.h).
    auto id = req.find("E2b-Sandbox-Id");
    auto fwd = req.find(AccessTokens::kForwardHeader);
    if (id == req.end() || fwd == req.end() || !s.tokens.forwarded(id->value(), fwd->value()))
      return Error(Code::kUnauthenticated, "invalid signature");
    std::string sid(id->value());
    auto agent = s.sandboxes.agent_of(sid);
    if (!agent || agent->failure())
      return Error(Code::kUnavailable, "sandbox " + sid + " is not running");
    return Target{sid, std::move(agent), sr.user.empty() ? "user" : sr.user};
  }
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  // The URL names its sandbox (header or Host): one signature checked,
  // never one per live sandbox.
  std::vector<std::string> candidates;
  if (auto it = req.find("E2b-Sandbox-Id"); it != req.end())
    candidates.emplace_back(it->value());
  else if (auto host = sandboxFromHost(req[http::field::host]))
    candidates.push_back(*host);
  else
    return Error(Code::kInvalidArgument,
                 "a signed URL names its sandbox: send E2b-Sandbox-Id or use a "
                 "49983-<id>.<domain> host");
  for (const auto& id : candidates) {
    auto st = checkFileSignature(sr, s.tokens.forSandbox(id), now);
    if (!st.ok()) return st.error();
    auto agent = s.sandboxes.agent_of(id);
    if (!agent || agent->failure())
      return Error(Code::kUnavailable, "sandbox " + id + " is not running");
    Target t{id, std::move(agent), sr.user.empty() ? "user" : sr.user};
    return t;
  }
  return Error(Code::kUnauthenticated, "invalid signature");
}

asio::awaitable<std::optional<Response>> Services::getFile(const Request& req,
                                                           beast::tcp_stream& stream) {
  const std::initializer_list<std::string_view> allowed = {"path", "username", "signature",
                                                           "signature_expiration"};
  auto q = http::parseQuery(req.target(), allowed);
  if (!q.ok()) co_return filesError(req, q.error());
  auto t = filesTarget(*this, req, *q, "read");
  if (!t.ok()) co_return filesError(req, t.error());
  if (q->count("username")) t->user = (*q)["username"];
  auto user = co_await lookupUser(*t->agent, t->user);
  if (!user.ok()) co_return filesError(req, user.error());
  auto path = resolvePath((*q)["path"], *user);
  if (!path.ok()) co_return filesError(req, path.error());
  auto st = co_await t->agent->stat(*path);
  if (!st.ok()) {
    Error e = fromGuest(st.error());
    if (e.code() == Code::kNotFound)
      e = Error(Code::kNotFound, "path '" + *path + "' does not exist");
    co_return filesError(req, e);
  }
  if (static_cast<agentproto::FileType>(st->type) == agentproto::FileType::kDir)
    co_return filesError(req, Error(Code::kInvalidArgument, "path '" + *path + "' is a directory"));
  auto reader = co_await t->agent->readFile(*path, 0);
  if (!reader.ok()) co_return filesError(req, fromGuest(reader.error()));

  bool gzip = acceptsGzip(req);
  std::optional<Gzip> gz;
  if (gzip) gz.emplace();
  http::response<http::empty_body> head{http::status::ok, req.version()};
  head.set(http::field::content_type, "application/octet-stream");
  std::string name = path->substr(path->find_last_of('/') + 1);
  http::setDownloadHeaders(head, "inline", name);
  if (gzip) head.set(http::field::content_encoding, "gzip");
  head.set(http::field::server, "vessel");
  head.keep_alive(false);
  http::ChunkedWriter out(stream, kWriteTimeout);
  bool started = co_await out.head(std::move(head));
  if (!started) co_return std::nullopt;
  // The file's pieces, deflated off the io thread when asked (the last
  // call flushes the gzip trailer).
  bool finished = false;
  uint64_t size = 0;
  auto next = [&]() -> asio::awaitable<Result<std::optional<std::string>>> {
    if (finished) co_return std::optional<std::string>();
    auto chunk = co_await (*reader)->read();
    if (!chunk.ok()) co_return std::move(chunk).error();
    finished = !chunk->has_value();
    std::string data = finished ? std::string() : std::move(**chunk);
    size += data.size();
    if (gz) {
      auto deflate = [&gz, &data, end = finished] { return gz->feed(data, end); };
      data = co_await codec.run(std::move(deflate));
    }
    co_return std::optional<std::string>(std::move(data));
  };
  auto copied = co_await http::copyChunks(out, next);
  if (!copied.ok()) {
    log().forSandbox(t->sandbox_id).warn("GET /files {}: {}", *path, copied.error().message());
    boost::system::error_code ec;
    stream.socket().close(ec);  // no last chunk: the client sees a cut transfer
    co_return std::nullopt;
  }
  if (*copied) t->agent->noteFile({.origin = "envd", .op = "read", .path = *path, .size = size});
  boost::system::error_code ec;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  co_return std::nullopt;
}

asio::awaitable<Response> Services::postFile(const Request& req) {
  const std::initializer_list<std::string_view> allowed = {"path", "username", "signature",
                                                           "signature_expiration"};
  auto q = http::parseQuery(req.target(), allowed);
  if (!q.ok()) co_return filesError(req, q.error());
  auto t = filesTarget(*this, req, *q, "write");
  if (!t.ok()) co_return filesError(req, t.error());
  if (q->count("username")) t->user = (*q)["username"];
  auto user = co_await lookupUser(*t->agent, t->user);
  if (!user.ok()) co_return filesError(req, user.error());
  auto metadata = metadataHeaders(req);
  if (!metadata.ok()) co_return filesError(req, metadata.error());

  bool gzip = false;
  if (auto ce = req.find(http::field::content_encoding); ce != req.end()) {
    std::string v(ce->value());
    if (v == "gzip")
      gzip = true;
    else if (v != "identity")
      co_return filesError(req, Error(Code::kInvalidArgument, "unsupported Content-Encoding " + v));
  }
  const std::string& body = req.body();
  std::string ctype(req[http::field::content_type]);
  json::array written;
  if (ctype.rfind("multipart/form-data", 0) != 0) {
    if (!q->count("path"))
      co_return filesError(
          req, Error(Code::kInvalidArgument, "path is required for octet-stream uploads"));
    auto entry = co_await uploadOctets(*t, *user, (*q)["path"], *metadata, body, gzip);
    if (!entry.ok()) co_return filesError(req, entry.error());
    written.push_back(std::move(*entry));
  } else {
    std::optional<std::string> path;
    if (q->count("path")) path = (*q)["path"];
    auto entries = co_await uploadMultipart(*t, *user, path, *metadata, body, ctype, gzip);
    if (!entries.ok()) co_return filesError(req, entries.error());
    written = std::move(*entries);
  }
  if (written.empty())
    co_return filesError(req, Error(Code::kInvalidArgument, "no file in the request"));
  Response res{http::status::ok, req.version()};
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = json::serialize(written);
  res.prepare_payload();
  co_return res;
}

asio::awaitable<Result<json::object>> Services::uploadOctets(
    const Target& t, const UserInfo& user, std::string path,
    const std::vector<agentproto::Xattr>& metadata, const std::string& body, bool gzip) {
  // Streamed into the file a piece at a time: a gzip body is inflated off
  // the io thread, never whole, within max_inflated.
  std::optional<Inflater> inflater;
  if (gzip) inflater.emplace(body);
  size_t off = 0;
  uint64_t inflated = 0;
  UploadSource next = [&]() -> asio::awaitable<Result<std::optional<std::string>>> {
    if (!inflater) {
      if (off >= body.size()) co_return std::optional<std::string>();
      std::string piece = body.substr(off, kUploadPiece);
      off += piece.size();
      co_return std::optional<std::string>(std::move(piece));
    }
    if (inflater->done()) co_return std::optional<std::string>();
    auto step = [&inflater] { return inflater->next(kUploadPiece); };
    auto piece = co_await codec.run(std::move(step));
    if (!piece.ok()) co_return std::move(piece).error();
    inflated += piece->size();
    if (inflated > limits.max_inflated)
      co_return Error(Code::kResourceExhausted, "gzip body inflates past the upload limit");
    co_return std::optional<std::string>(std::move(*piece));
  };
  // Inflating uploads take turns: each holds a piece and a core.
  if (gzip) co_await inflating.acquire();
  ScopeExit turn([&] {
    if (gzip) inflating.release();
  });
  co_return co_await writeUpload(t, user, std::move(path), metadata, next);
}

asio::awaitable<Result<json::array>> Services::uploadMultipart(
    const Target& t, const UserInfo& user, const std::optional<std::string>& path,
    const std::vector<agentproto::Xattr>& metadata, const std::string& body,
    const std::string& ctype, bool gzip) {
  auto boundary = multipartBoundary(ctype);
  if (!boundary.ok()) co_return boundary.error();
  // Parsed whole: a gzip one is inflated (off the io thread, in turn) only
  // up to max_inflated_multipart.
  std::string inflated;
  if (gzip) {
    co_await inflating.acquire();
    ScopeExit turn([&] { inflating.release(); });
    size_t cap = limits.max_inflated_multipart;
    auto whole = [&body, cap] { return inflateAll(body, cap); };
    auto r = co_await codec.run(std::move(whole));
    if (!r.ok()) co_return std::move(r).error();
    inflated = std::move(*r);
  }
  auto parts =
      parseMultipart(gzip ? std::string_view(inflated) : std::string_view(body), *boundary);
  if (!parts.ok()) co_return std::move(parts).error();
  json::array written;
  for (auto& p : *parts) {
    if (p.name != "file") continue;
    std::string fp = path ? *path : p.filename;
    bool sent = false;
    UploadSource next = [&]() -> asio::awaitable<Result<std::optional<std::string>>> {
      if (sent) co_return std::optional<std::string>();
      sent = true;
      co_return std::optional<std::string>(std::move(p.data));
    };
    auto entry = co_await writeUpload(t, user, std::move(fp), metadata, next);
    if (!entry.ok()) co_return std::move(entry).error();
    written.push_back(std::move(*entry));
  }
  co_return written;
}

asio::awaitable<Result<json::object>> Services::writeUpload(
    const Target& t, const UserInfo& user, std::string p,
    const std::vector<agentproto::Xattr>& metadata, const UploadSource& next) {
  auto path = resolvePath(p, user);
  if (!path.ok()) co_return path.error();
  std::string parent = path->substr(0, path->find_last_of('/'));
  if (parent.empty()) parent = "/";
  if (auto st = co_await ensureDirs(*t.agent, parent, user); !st.ok()) co_return st.error();
  auto existing = co_await t.agent->stat(*path);
  if (existing.ok() &&
      static_cast<agentproto::FileType>(existing->type) == agentproto::FileType::kDir)
    co_return Error(Code::kInvalidArgument, "path '" + *path + "' is a directory");
  // In place, as envd writes: watchers see a write, and an existing file
  // keeps its mode and owner.
  agentclient::WriteFileOptions wo;
  wo.path = *path;
  wo.mode = 0644;
  wo.uid = user.uid;
  wo.gid = user.gid;
  wo.in_place = true;
  auto w = co_await t.agent->writeFile(wo);
  if (!w.ok()) co_return fromGuest(w.error());
  uint64_t size = 0;
  for (;;) {
    auto piece = co_await next();
    if (!piece.ok()) {
      // A file this upload made is not left half written (an upload bomb
      // refused past the limit); one that was there keeps what it got, as
      // a failed write in place leaves it.
      if (!existing.ok()) (void)co_await t.agent->remove(*path, false);
      co_return std::move(piece).error();
    }
    if (!*piece) break;
    std::string_view data = **piece;
    size += data.size();
    for (size_t off = 0; off < data.size(); off += kUploadPiece) {
      auto st = co_await (*w)->write(data.substr(off, kUploadPiece));
      if (!st.ok()) co_return fromGuest(st.error());
    }
  }
  auto fin = co_await (*w)->finish();
  if (!fin.ok()) co_return fromGuest(fin.error());
  t.agent->noteFile({.origin = "envd", .op = "write", .path = *path, .size = size});
  // Every upload replaces the file's metadata (none sent: none kept).
  auto set = co_await t.agent->setXattrs(*path, kMetadataPrefix, metadata);
  if (!set.ok() && !metadata.empty()) co_return fromGuest(set.error());
  std::string name = path->substr(path->find_last_of('/') + 1);
  json::object entry{{"path", *path}, {"name", name}, {"type", "file"}};
  if (!metadata.empty()) {
    json::object md;
    for (const auto& a : metadata) md[a.name] = a.value;
    entry["metadata"] = std::move(md);
  }
  co_return entry;
}

}  // namespace vessel::e2b::envd
