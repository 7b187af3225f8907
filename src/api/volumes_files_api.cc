// A volume's files without a sandbox (volumes_api.h): every call resolves
// its path beneath the volume's root (volumes/files.h) on a worker thread;
// a download streams with the HTTP library's chunked writer, an upload is
// written to a temporary file as it arrives and renamed over the target
// only once whole, so a cut upload changes nothing.
#include <unistd.h>

#include <boost/json.hpp>

#include "api/auth.h"
#include "api/data_plane_requests.h"
#include "api/resources.h"
#include "api/volumes_api.h"
#include "base/log.h"
#include "base/offload.h"
#include "http/headers.h"
#include "http/stream.h"

namespace vessel::api {

namespace json = boost::json;
namespace beast = boost::beast;
using volumes::FileInfo;
using volumes::VolumeFiles;

namespace {

constexpr size_t kReadChunk = 256 * 1024;
constexpr auto kWriteTimeout = std::chrono::seconds(30);

json::object infoJson(const FileInfo& f) {
  json::object o{
      {"name", f.name}, {"path", f.path}, {"type", f.type}, {"size", f.size},
      {"mode", f.mode}, {"uid", f.uid},   {"gid", f.gid},   {"mtime", rfc3339(f.mtime_ms)}};
  if (!f.target.empty()) o["link_target"] = f.target;
  return o;
}

const Logger& log() {
  static const Logger l("volumes");
  return l;
}

Response noContent(const Request& req) {
  Response res{http::status::no_content, req.version()};
  res.set(http::field::server, "vessel");
  res.keep_alive(req.keep_alive());
  return res;
}

}  // namespace

// Behind `authed` but the download and upload, which authenticate
// themselves (a stream's handler owns its connection; an upload's body
// is read only after).
void VolumesApi::installFiles(Router& r, const Authenticated& authed) {
  using P = const Params&;
  const std::string base = "/v1/volumes/{name:volume}/files";
  r.get(base, authed([this](const Request& q, P p, std::string t) {
          return listFiles(q, std::move(t), p["name"]);
        }));
  r.del(base, authed([this](const Request& q, P p, std::string t) {
          return removeFile(q, std::move(t), p["name"]);
        }));
  r.post("/v1/volumes/{name:volume}/files:mkdir",
         authed([this](const Request& q, P p, std::string t) {
           return mkdir(q, std::move(t), p["name"]);
         }));
  r.addStream(http::verb::get, base + "/content",
              [this](const Request& q, P p,
                     beast::tcp_stream& s) -> asio::awaitable<std::optional<Response>> {
                auto tenant = authenticate(q, store_);
                if (!tenant.ok()) co_return errorResponse(q, tenant.error());
                std::string name = p["name"];
                co_return co_await readFile(q, s, std::move(*tenant), std::move(name));
              });
  r.addUpload(
      http::verb::put, base + "/content", limits_.max_mib << 20,
      [this](const Request& q, P p, http::BodyReader& b) { return writeFile(q, b, p["name"]); });
}

Result<std::pair<store::VolumeRecord, VolumeFiles>> VolumesApi::filesOf(const std::string& tenant,
                                                                        const std::string& name) {
  VESSEL_TRY(needHost());
  VESSEL_ASSIGN_OR_RETURN(auto v, store_.getVolume(tenant, name));
  if (!v) return Error(Code::kNotFound, "volume " + name + " does not exist");
  VESSEL_ASSIGN_OR_RETURN(std::string root, host_->root(v->id));
  VESSEL_ASSIGN_OR_RETURN(auto files, VolumeFiles::open(root, v->read_only));
  return std::make_pair(std::move(*v), std::move(files));
}

asio::awaitable<Response> VolumesApi::listFiles(const Request& req, std::string tenant,
                                                std::string name) {
  auto q = parseQuery(req.target(), {"path"});
  if (!q.ok()) co_return errorResponse(req, q.error());
  auto f = filesOf(tenant, name);
  if (!f.ok()) co_return errorResponse(req, f.error());
  auto run = [files = std::move(f->second), path = (*q)["path"]] { return files.list(path); };
  auto l = co_await offload(*files_, std::move(run));
  if (!l.ok()) co_return errorResponse(req, l.error());
  json::array items;
  for (const auto& e : *l) items.push_back(infoJson(e));
  co_return jsonResponse(req, http::status::ok,
                         json::serialize(json::object{{"entries", std::move(items)}}));
}

asio::awaitable<Response> VolumesApi::removeFile(const Request& req, std::string tenant,
                                                 std::string name) {
  auto q = parseQuery(req.target(), {"path", "recursive"});
  if (!q.ok()) co_return errorResponse(req, q.error());
  auto rec = boolParam(*q, "recursive", false);
  if (!rec.ok()) co_return errorResponse(req, rec.error());
  if (!q->count("path")) co_return errorResponse(req, http::badRequest("path is required"));
  auto f = filesOf(tenant, name);
  if (!f.ok()) co_return errorResponse(req, f.error());
  auto run = [files = std::move(f->second), path = (*q)["path"], r = *rec] {
    return files.remove(path, r);
  };
  Status s = co_await offload(*files_, std::move(run));
  if (!s.ok()) co_return errorResponse(req, s.error());
  co_return noContent(req);
}

asio::awaitable<Response> VolumesApi::mkdir(const Request& req, std::string tenant,
                                            std::string name) {
  auto in = parseMkdirRequest(req.body());
  if (!in.ok()) co_return errorResponse(req, in.error());
  auto f = filesOf(tenant, name);
  if (!f.ok()) co_return errorResponse(req, f.error());
  auto run = [files = std::move(f->second), in = std::move(*in)] {
    return files.mkdir(in.path, in.mode, in.parents);
  };
  Status s = co_await offload(*files_, std::move(run));
  if (!s.ok()) co_return errorResponse(req, s.error());
  co_return noContent(req);
}

asio::awaitable<std::optional<Response>> VolumesApi::readFile(const Request& req,
                                                              beast::tcp_stream& stream,
                                                              std::string tenant,
                                                              std::string name) {
  auto q = parseQuery(req.target(), {"path"});
  if (!q.ok()) co_return errorResponse(req, q.error());
  auto f = filesOf(tenant, name);
  if (!f.ok()) co_return errorResponse(req, f.error());
  const std::string path = (*q)["path"];
  auto open = [files = std::move(f->second), path] { return files.openRead(path); };
  auto fd = co_await offload(*files_, std::move(open));
  if (!fd.ok()) co_return errorResponse(req, fd.error());
  auto file = std::make_shared<Fd>(std::move(*fd));

  http::response<http::empty_body> head{http::status::ok, req.version()};
  head.set(http::field::content_type, "application/octet-stream");
  http::setDownloadHeaders(head, "attachment", path.substr(path.find_last_of('/') + 1));
  head.set(http::field::server, "vessel");
  head.keep_alive(false);
  http::ChunkedWriter out(stream, kWriteTimeout);
  if (!co_await out.head(std::move(head))) co_return std::nullopt;
  auto next = [this, file]() -> asio::awaitable<Result<std::optional<std::string>>> {
    auto piece = [file]() -> Result<std::optional<std::string>> {
      std::string buf(kReadChunk, '\0');
      ssize_t n = ::read(file->get(), buf.data(), buf.size());
      if (n < 0) return Error::fromErrno("read the volume's file");
      if (n == 0) return std::optional<std::string>();
      buf.resize(static_cast<size_t>(n));
      return std::optional<std::string>(std::move(buf));
    };
    co_return co_await offload(*files_, std::move(piece));
  };
  auto copied = co_await http::copyChunks(out, next);
  // A failure leaves out the last chunk: the client sees a cut transfer.
  if (!copied.ok()) log().warn("volume {}: read {}: {}", name, path, copied.error().message());
  beast::error_code ec;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  co_return std::nullopt;
}

asio::awaitable<Response> VolumesApi::writeFile(const Request& req, http::BodyReader& body,
                                                std::string name) {
  auto tenant = authenticate(req, store_);
  if (!tenant.ok()) co_return errorResponse(req, tenant.error());
  auto q = parseQuery(req.target(), {"path", "mode"});
  if (!q.ok()) co_return errorResponse(req, q.error());
  uint32_t mode = 0644;
  if (q->count("mode")) {
    auto m = modeParam((*q)["mode"]);
    if (!m.ok()) co_return errorResponse(req, m.error());
    mode = *m;
  }
  if (!q->count("path")) co_return errorResponse(req, http::badRequest("path is required"));
  auto f = filesOf(*tenant, name);
  if (!f.ok()) co_return errorResponse(req, f.error());
  auto begin = [files = std::move(f->second), path = (*q)["path"], mode] {
    return files.write(path, mode);
  };
  auto opened = co_await offload(*files_, std::move(begin));
  if (!opened.ok()) co_return errorResponse(req, opened.error());
  auto w = std::make_shared<VolumeFiles::Write>(std::move(*opened));
  for (;;) {
    auto chunk = co_await body.next();
    if (!chunk.ok()) co_return errorResponse(req, chunk.error().withContext("upload"));
    if (!*chunk) break;
    auto append = [w, data = std::move(**chunk)] { return w->append(data); };
    Status s = co_await offload(*files_, std::move(append));
    // Unfinished: the temporary goes with `w`, the target is untouched.
    if (!s.ok()) co_return errorResponse(req, s.error());
  }
  auto commit = [w] { return w->commit(); };
  auto info = co_await offload(*files_, std::move(commit));
  if (!info.ok()) co_return errorResponse(req, info.error());
  co_return jsonResponse(req, http::status::created, json::serialize(infoJson(*info)));
}

}  // namespace vessel::api
