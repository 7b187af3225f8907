// A volume's files without a sandbox (volumes_api.h): each call finds the
// tenant's volume in the store and hands it to the keeper, which resolves
// its path beneath the volume's root (volumes/files.h) here or on the
// volume's node; a download streams with the HTTP library's chunked writer
// piece by piece as the keeper reads them, an upload is handed on as it
// arrives and made whole (renamed over the target) only at its end, so a
// cut upload changes nothing.
#include <boost/json.hpp>

#include "api/auth.h"
#include "api/data_plane_requests.h"
#include "api/resources.h"
#include "api/volumes_api.h"
#include "base/log.h"
#include "http/headers.h"
#include "http/stream.h"

namespace vessel::api {

namespace json = boost::json;
namespace beast = boost::beast;

namespace {

constexpr auto kWriteTimeout = std::chrono::seconds(30);

json::object infoJson(const ops::VolumeFileInfo& f) {
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

asio::awaitable<Response> VolumesApi::listFiles(const Request& req, std::string tenant,
                                                std::string name) {
  auto q = parseQuery(req.target(), {"path"});
  if (!q.ok()) co_return errorResponse(req, q.error());
  auto v = find(tenant, name);
  if (!v.ok()) co_return errorResponse(req, v.error());
  std::string path = (*q)["path"];
  auto l = co_await keeper_.list(std::move(*v), std::move(path));
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
  auto v = find(tenant, name);
  if (!v.ok()) co_return errorResponse(req, v.error());
  std::string path = (*q)["path"];
  Status s = co_await keeper_.removePath(std::move(*v), std::move(path), *rec);
  if (!s.ok()) co_return errorResponse(req, s.error());
  co_return noContent(req);
}

asio::awaitable<Response> VolumesApi::mkdir(const Request& req, std::string tenant,
                                            std::string name) {
  auto in = parseMkdirRequest(req.body());
  if (!in.ok()) co_return errorResponse(req, in.error());
  auto v = find(tenant, name);
  if (!v.ok()) co_return errorResponse(req, v.error());
  Status s = co_await keeper_.mkdir(std::move(*v), std::move(in->path), in->mode, in->parents);
  if (!s.ok()) co_return errorResponse(req, s.error());
  co_return noContent(req);
}

asio::awaitable<std::optional<Response>> VolumesApi::readFile(const Request& req,
                                                              beast::tcp_stream& stream,
                                                              std::string tenant,
                                                              std::string name) {
  auto q = parseQuery(req.target(), {"path"});
  if (!q.ok()) co_return errorResponse(req, q.error());
  auto v = find(tenant, name);
  if (!v.ok()) co_return errorResponse(req, v.error());
  const std::string path = (*q)["path"];
  std::string at = path;
  auto opened = co_await keeper_.read(std::move(*v), std::move(at));
  if (!opened.ok()) co_return errorResponse(req, opened.error());
  std::shared_ptr<ops::VolumeReader> file = std::move(*opened);

  http::response<http::empty_body> head{http::status::ok, req.version()};
  head.set(http::field::content_type, "application/octet-stream");
  http::setDownloadHeaders(head, "attachment", path.substr(path.find_last_of('/') + 1));
  head.set(http::field::server, "vessel");
  head.keep_alive(false);
  http::ChunkedWriter out(stream, kWriteTimeout);
  if (!co_await out.head(std::move(head))) co_return std::nullopt;
  auto next = [file] { return file->next(); };
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
  auto v = find(*tenant, name);
  if (!v.ok()) co_return errorResponse(req, v.error());
  std::string path = (*q)["path"];
  auto opened = co_await keeper_.write(std::move(*v), std::move(path), mode);
  if (!opened.ok()) co_return errorResponse(req, opened.error());
  std::unique_ptr<ops::VolumeWriter> w = std::move(*opened);
  for (;;) {
    auto chunk = co_await body.next();
    if (!chunk.ok()) co_return errorResponse(req, chunk.error().withContext("upload"));
    if (!*chunk) break;
    Status s = co_await w->append(std::move(**chunk));
    // Unfinished: the temporary goes with `w`, the target is untouched.
    if (!s.ok()) co_return errorResponse(req, s.error());
  }
  auto info = co_await w->commit();
  if (!info.ok()) co_return errorResponse(req, info.error());
  co_return jsonResponse(req, http::status::created, json::serialize(infoJson(*info)));
}

}  // namespace vessel::api
