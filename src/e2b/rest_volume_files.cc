// E2B's Volume API, the files of a volume (/volumecontent/{volumeID}/dir,
// /path, /file): each request carries only the volume's token (Bearer),
// which names its tenant and is checked for this volume (access_token.h);
// every call then goes through the volume's confined files
// (volumes/files.h, the code /v1/volumes/{name}/files uses) on the file
// pool. A download is streamed in chunks; an upload is written aside as it
// arrives and renamed into place only once whole.
#include <unistd.h>

#include <boost/json.hpp>

#include "base/log.h"
#include "base/offload.h"
#include "e2b/rest.h"
#include "http/headers.h"
#include "http/stream.h"
#include "ops/events.h"

namespace vessel::e2b {

namespace json = boost::json;
namespace beast = boost::beast;
using volumes::FileInfo;
using volumes::VolumeFiles;

namespace {

constexpr size_t kReadChunk = 256 * 1024;
constexpr auto kWriteTimeout = std::chrono::seconds(30);

const Logger& log() {
  static const Logger l("e2b");
  return l;
}

// VolumeEntryStat.
json::object entryJson(const FileInfo& f) {
  std::string type = f.type == "dir"       ? "directory"
                     : f.type == "file"    ? "file"
                     : f.type == "symlink" ? "symlink"
                                           : "unknown";
  json::object o{{"name", f.name},
                 {"type", type},
                 {"path", f.path},
                 {"size", f.size},
                 {"mode", f.mode},
                 {"uid", f.uid},
                 {"gid", f.gid},
                 {"atime", ops::rfc3339(f.atime_ms)},
                 {"mtime", ops::rfc3339(f.mtime_ms)},
                 {"ctime", ops::rfc3339(f.ctime_ms)}};
  if (!f.target.empty()) o["target"] = f.target;
  return o;
}

// An upload refused before its body was read: the body is read and
// dropped first, up to kDrainBytes, so that the client, still sending,
// reads the answer rather than a reset (the server closes a connection
// whose body is left unread). A larger body is cut short as before.
constexpr uint64_t kDrainBytes = 1 << 20;

asio::awaitable<Response> refuseUpload(const Request& req, http::BodyReader& body, const Error& e) {
  while (body.received() <= kDrainBytes) {
    auto chunk = co_await body.next();
    if (!chunk.ok() || !*chunk) break;
  }
  co_return errorJson(req, e);
}

volumes::Attributes attributes(const Metadata& m) {
  volumes::Attributes a;
  a.uid = m.uid;
  a.gid = m.gid;
  a.mode = m.mode;
  return a;
}

}  // namespace

// The content routes authenticate themselves (contentFiles): the tenant's
// key is not what E2B's SDK sends here.
void RestApi::installVolumeFiles(http::Router& r) {
  using P = const http::Params&;
  const std::string base = "/volumecontent/{volumeID:volume}";
  r.get(base + "/dir", [this](const Request& q, P p) { return listDir(q, p["volumeID"]); });
  r.post(base + "/dir", [this](const Request& q, P p) { return makeDir(q, p["volumeID"]); });
  for (http::verb m : {http::verb::get, http::verb::patch, http::verb::delete_})
    r.add(m, base + "/path",
          [this, m](const Request& q, P p) { return pathInfo(q, p["volumeID"], m); });
  r.addStream(http::verb::get, base + "/file", [this](const Request& q, P p, beast::tcp_stream& s) {
    return readVolumeFile(q, s, p["volumeID"]);
  });
  r.addUpload(http::verb::put, base + "/file", volumes_.max_file_bytes,
              [this](const Request& q, P p, http::BodyReader& b) {
                return writeVolumeFile(q, b, p["volumeID"]);
              });
}

Result<VolumeFiles> RestApi::contentFiles(const Request& req, const std::string& id) {
  auto token = http::bearerToken(req);
  if (!token)
    return Error(Code::kUnauthenticated,
                 "the volume's token is required (Authorization: Bearer; VolumeAndToken.token)");
  auto tenant = tokens_.checkVolume(id, *token);
  if (!tenant) return Error(Code::kUnauthenticated, "the token is not volume " + id + "'s");
  VESSEL_ASSIGN_OR_RETURN(auto v, volumeById(*tenant, id));
  if (!volumes_.files || !volumes_.pool) return Error(Code::kUnavailable, "no volumes here");
  return volumes_.files(*tenant, v.name);
}

asio::awaitable<Response> RestApi::listDir(const Request& req, std::string id) {
  auto q = parseContentQuery(req.target(), ContentRoute::kListDir);
  if (!q.ok()) co_return errorJson(req, q.error());
  auto files = contentFiles(req, id);
  if (!files.ok()) co_return errorJson(req, files.error());
  auto run = [f = std::move(*files), q = std::move(*q)]() -> Result<std::vector<FileInfo>> {
    VESSEL_ASSIGN_OR_RETURN(FileInfo self, f.stat(q.path));
    if (self.type != "dir")
      return Error(Code::kInvalidArgument, "list " + self.path + ": not a directory");
    return f.list(q.path, q.depth);
  };
  auto l = co_await offload(*volumes_.pool, std::move(run));
  if (!l.ok()) co_return errorJson(req, l.error());
  json::array items;
  for (const auto& e : *l) items.push_back(entryJson(e));
  co_return jsonBody(req, http::status::ok, items);
}

// force: the parents too, and an existing directory is fine (mkdir -p);
// without it an existing one is 409. A mode or owner given is set
// afterwards, on the directory itself (mkdir's mode is masked by the
// umask); none given leaves an existing directory as it was.
asio::awaitable<Response> RestApi::makeDir(const Request& req, std::string id) {
  auto q = parseContentQuery(req.target(), ContentRoute::kMakeDir);
  if (!q.ok()) co_return errorJson(req, q.error());
  auto files = contentFiles(req, id);
  if (!files.ok()) co_return errorJson(req, files.error());
  auto run = [f = std::move(*files), q = std::move(*q)]() -> Result<FileInfo> {
    VESSEL_TRY(f.mkdir(q.path, q.meta.mode.value_or(0755), q.force));
    if (!q.meta.mode && !q.meta.uid && !q.meta.gid) return f.stat(q.path);
    return f.setAttributes(q.path, attributes(q.meta));
  };
  auto made = co_await offload(*volumes_.pool, std::move(run));
  if (!made.ok()) co_return errorJson(req, made.error());
  co_return jsonBody(req, http::status::created, entryJson(*made));
}

// GET: the entry's stat (a link's own, with its target); PATCH: its
// owner and mode changed; DELETE: removed, a directory with all it holds.
asio::awaitable<Response> RestApi::pathInfo(const Request& req, std::string id, http::verb method) {
  auto q = parseContentQuery(req.target(), ContentRoute::kPath);
  if (!q.ok()) co_return errorJson(req, q.error());
  Metadata meta;
  if (method == http::verb::patch) {
    auto m = parseMetadataPatch(req.body());
    if (!m.ok()) co_return errorJson(req, m.error());
    meta = *m;
  }
  auto files = contentFiles(req, id);
  if (!files.ok()) co_return errorJson(req, files.error());
  auto run = [f = std::move(*files), path = std::move(q->path), meta,
              method]() -> Result<std::optional<FileInfo>> {
    if (method == http::verb::delete_) {
      VESSEL_TRY(f.remove(path, true));
      return std::optional<FileInfo>();
    }
    if (method == http::verb::patch) {
      VESSEL_ASSIGN_OR_RETURN(auto info, f.setAttributes(path, attributes(meta)));
      return std::optional<FileInfo>(std::move(info));
    }
    VESSEL_ASSIGN_OR_RETURN(auto info, f.stat(path));
    return std::optional<FileInfo>(std::move(info));
  };
  auto done = co_await offload(*volumes_.pool, std::move(run));
  if (!done.ok()) co_return errorJson(req, done.error());
  if (!*done) co_return noContent(req);
  co_return jsonBody(req, http::status::ok, entryJson(**done));
}

asio::awaitable<std::optional<Response>> RestApi::readVolumeFile(const Request& req,
                                                                 beast::tcp_stream& stream,
                                                                 std::string id) {
  auto q = parseContentQuery(req.target(), ContentRoute::kFile);
  if (!q.ok()) co_return errorJson(req, q.error());
  auto files = contentFiles(req, id);
  if (!files.ok()) co_return errorJson(req, files.error());
  const std::string path = q->path;
  auto open = [f = std::move(*files), path] { return f.openRead(path); };
  auto fd = co_await offload(*volumes_.pool, std::move(open));
  if (!fd.ok()) co_return errorJson(req, fd.error());
  auto file = std::make_shared<Fd>(std::move(*fd));

  http::response<http::empty_body> head{http::status::ok, req.version()};
  head.set(http::field::content_type, "application/octet-stream");
  http::setDownloadHeaders(head, "attachment", path.substr(path.find_last_of('/') + 1));
  head.keep_alive(false);
  http::ChunkedWriter out(stream, kWriteTimeout);
  bool started = co_await out.head(std::move(head));
  if (!started) co_return std::nullopt;
  auto next = [pool = volumes_.pool,
               file]() -> asio::awaitable<Result<std::optional<std::string>>> {
    auto piece = [file]() -> Result<std::optional<std::string>> {
      std::string buf(kReadChunk, '\0');
      ssize_t n = ::read(file->get(), buf.data(), buf.size());
      if (n < 0) return Error::fromErrno("read the volume's file");
      if (n == 0) return std::optional<std::string>();
      buf.resize(static_cast<size_t>(n));
      return std::optional<std::string>(std::move(buf));
    };
    co_return co_await offload(*pool, std::move(piece));
  };
  auto copied = co_await http::copyChunks(out, next);
  // A failure leaves out the last chunk: the client sees a cut transfer.
  if (!copied.ok()) log().warn("volume {}: read {}: {}", id, path, copied.error().message());
  beast::error_code ec;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  co_return std::nullopt;
}

// Without force an existing file is 409, checked before the body is read
// and again, atomically, at the rename.
asio::awaitable<Response> RestApi::writeVolumeFile(const Request& req, http::BodyReader& body,
                                                   std::string id) {
  auto q = parseContentQuery(req.target(), ContentRoute::kWriteFile);
  if (!q.ok()) co_return co_await refuseUpload(req, body, q.error());
  auto files = contentFiles(req, id);
  if (!files.ok()) co_return co_await refuseUpload(req, body, files.error());
  volumes::WriteOptions o;
  o.mode = q->meta.mode.value_or(0644);
  o.uid = q->meta.uid;
  o.gid = q->meta.gid;
  o.replace = q->force;
  auto begin = [f = std::move(*files), path = q->path, o] { return f.write(path, o); };
  auto opened = co_await offload(*volumes_.pool, std::move(begin));
  if (!opened.ok()) co_return co_await refuseUpload(req, body, opened.error());
  auto w = std::make_shared<VolumeFiles::Write>(std::move(*opened));
  for (;;) {
    auto chunk = co_await body.next();
    if (!chunk.ok()) co_return errorJson(req, chunk.error().withContext("upload"));
    if (!*chunk) break;
    auto append = [w, data = std::move(**chunk)] { return w->append(data); };
    Status s = co_await offload(*volumes_.pool, std::move(append));
    // Unfinished: the temporary goes with `w`, the target is untouched.
    if (!s.ok()) co_return errorJson(req, s.error());
  }
  auto commit = [w] { return w->commit(); };
  auto info = co_await offload(*volumes_.pool, std::move(commit));
  if (!info.ok()) co_return errorJson(req, info.error());
  co_return jsonBody(req, http::status::created, entryJson(*info));
}

}  // namespace vessel::e2b
