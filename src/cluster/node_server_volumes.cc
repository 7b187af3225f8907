// The node API's volume calls: an API replica's volumes API reaching the
// volumes this node keeps (docs/design.md, "Volumes"). Each is one call of
// this node's ops::VolumeKeeper (or, for mounts, its ops::VolumeMounter),
// the same code a single machine's API runs: the replica has checked the
// tenant, the name and the quota in the store, and names the volume by id.
// A read answers the file as a chunked body, piece by piece as the keeper
// reads it; a write takes the file as the request's body, its call in a
// header, refused before the body is read (Expect: 100-continue) when the
// file cannot be written.
#include "base/log.h"
#include "cluster/node_server.h"
#include "http/stream.h"

namespace vessel::cluster {

namespace beast = boost::beast;

namespace {

constexpr std::string_view kPrefix = "/node/v1/";
// What a node takes in one volume_write: a volume's size bounds it first.
constexpr uint64_t kMaxWrite = uint64_t{1} << 40;
constexpr auto kWriteTimeout = std::chrono::seconds(30);

Logger volumesLog() { return Logger("node-api"); }

store::VolumeRecord recordOf(const NodeCall& c) {
  store::VolumeRecord v;
  v.id = c.volume;
  v.size_mib = c.size_mib;
  v.read_only = c.read_only;
  return v;
}

Status needVolume(const NodeCall& c, const std::string& name) {
  if (c.volume.empty()) return Error(Code::kInvalidArgument, "node call " + name + ": volume");
  return okStatus();
}

}  // namespace

bool NodeServer::isVolumeCall(std::string_view name) { return name.substr(0, 7) == "volume_"; }

// One branch per call, each a single keeper or mounter call: a dispatch
// table that reads best whole, like NodeServer::call.
asio::awaitable<Result<NodeReply>> NodeServer::volumeCall(const std::string& name, NodeCall c) {
  NodeReply r;
  const bool mounts = name == "volume_mount" || name == "volume_release" ||
                      name == "volume_quiesce" || name == "volume_unquiesce";
  if (mounts) {
    if (c.id.empty()) co_return Error(Code::kInvalidArgument, "node call " + name + ": id");
    if (!mounter_)
      co_return Error(Code::kUnavailable, "volumes cannot be mounted in sandboxes on this node");
    auto agent = node_.agent(c.id);
    if (name == "volume_mount") {
      if (c.mounts.empty()) co_return Error(Code::kInvalidArgument, "node call volume_mount");
      auto op = mounter_->mount(c.id, std::move(agent), std::move(c.mounts));
      r.status = co_await std::move(op);
    } else if (name == "volume_release") {
      mounter_->release(c.id);
    } else if (name == "volume_quiesce") {
      auto op = mounter_->quiesce(c.id, std::move(agent), c.hold);
      co_await std::move(op);
    } else {
      auto op = mounter_->unquiesce(c.id, std::move(agent));
      co_await std::move(op);
    }
    r.holding = node_.holding(c.id);
    co_return r;
  }
  if (!keeper_) co_return Error(Code::kUnavailable, "this node keeps no volumes");
  if (auto s = needVolume(c, name); !s.ok()) co_return std::move(s).error();
  store::VolumeRecord v = recordOf(c);
  if (name == "volume_create") {
    r.status = co_await keeper_->create(std::move(v));
  } else if (name == "volume_copy") {
    if (c.volume_to.empty()) co_return Error(Code::kInvalidArgument, "node call volume_copy");
    store::VolumeRecord to;
    to.id = c.volume_to;
    to.read_only = c.read_only;
    v.read_only = false;
    r.status = co_await keeper_->copy(std::move(v), std::move(to));
  } else if (name == "volume_remove") {
    r.status = co_await keeper_->remove(std::move(v));
  } else if (name == "volume_usage") {
    auto u = co_await keeper_->usage(std::move(v));
    if (u.ok())
      r.volume_usage = *u;
    else
      r.status = std::move(u).error();
  } else if (name == "volume_list") {
    auto l = co_await keeper_->list(std::move(v), std::move(c.path));
    if (l.ok())
      r.entries = std::move(*l);
    else
      r.status = std::move(l).error();
  } else if (name == "volume_mkdir") {
    r.status = co_await keeper_->mkdir(std::move(v), std::move(c.path), c.mode, c.parents);
  } else if (name == "volume_remove_path") {
    r.status = co_await keeper_->removePath(std::move(v), std::move(c.path), c.recursive);
  } else {
    co_return Error(Code::kNotFound, "the node API has no call " + name);
  }
  if (!r.status.ok() && r.status.error().code() == Code::kInternal)
    volumesLog().warn("{} {}: {}", name, c.volume, r.status.error().message());
  co_return r;
}

void NodeServer::installVolumeStreams(http::Router& r, const Refusal& refused) {
  r.addStream(
      http::verb::post, std::string(kPrefix) + "volume_read",
      [this, refused](const http::Request& req, const http::Params&,
                      beast::tcp_stream& s) -> asio::awaitable<std::optional<http::Response>> {
        if (auto no = refused(req)) co_return std::move(*no);
        co_return co_await readStream(req, s);
      });
  r.addUpload(http::verb::post, std::string(kPrefix) + "volume_write", kMaxWrite,
              [this, refused](const http::Request& req, const http::Params&,
                              http::BodyReader& body) -> asio::awaitable<http::Response> {
                if (auto no = refused(req)) co_return std::move(*no);
                co_return co_await writeStream(req, body);
              });
}

// The file as a chunked body; a failure before the first byte is a reply
// (JSON, ok false), one after it a cut transfer (no last chunk), which the
// replica passes on to its client as such.
asio::awaitable<std::optional<http::Response>> NodeServer::readStream(const http::Request& req,
                                                                      beast::tcp_stream& stream) {
  auto refuse = [&req](Status s) {
    NodeReply r;
    r.status = std::move(s);
    return http::jsonResponse(req, http::status::ok, serializeNodeReply(r));
  };
  auto c = parseNodeCall(req.body());
  if (!c.ok()) co_return http::errorResponse(req, c.error());
  if (!keeper_) co_return refuse(Error(Code::kUnavailable, "this node keeps no volumes"));
  if (auto s = needVolume(*c, "volume_read"); !s.ok()) co_return refuse(std::move(s));
  store::VolumeRecord v = recordOf(*c);
  auto opened = co_await keeper_->read(std::move(v), std::move(c->path));
  if (!opened.ok()) co_return refuse(std::move(opened).error());
  std::shared_ptr<ops::VolumeReader> file = std::move(*opened);
  http::response<http::empty_body> head{http::status::ok, req.version()};
  head.set(http::field::content_type, "application/octet-stream");
  head.keep_alive(false);
  http::ChunkedWriter out(stream, kWriteTimeout);
  if (!co_await out.head(std::move(head))) co_return std::nullopt;
  auto next = [file] { return file->next(); };
  auto copied = co_await http::copyChunks(out, next);
  if (!copied.ok()) volumesLog().warn("volume_read {}: {}", c->volume, copied.error().message());
  beast::error_code ec;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  co_return std::nullopt;
}

asio::awaitable<http::Response> NodeServer::writeStream(const http::Request& req,
                                                        http::BodyReader& body) {
  auto answer = [&req](NodeReply r) {
    return http::jsonResponse(req, http::status::ok, serializeNodeReply(r));
  };
  NodeReply r;
  auto c = parseNodeCallHeader(req[kNodeCallHeader]);
  if (!c.ok()) co_return http::errorResponse(req, c.error());
  if (!keeper_) {
    r.status = Error(Code::kUnavailable, "this node keeps no volumes");
    co_return answer(std::move(r));
  }
  if (auto s = needVolume(*c, "volume_write"); !s.ok())
    co_return http::errorResponse(req, s.error());
  store::VolumeRecord v = recordOf(*c);
  // Opened before a byte of the file is read: a refusal (a snapshot, a
  // bad path) reaches the replica before it sends the file.
  auto opened = co_await keeper_->write(std::move(v), std::move(c->path), c->mode);
  if (!opened.ok()) {
    r.status = std::move(opened).error();
    co_return answer(std::move(r));
  }
  std::unique_ptr<ops::VolumeWriter> w = std::move(*opened);
  for (;;) {
    auto chunk = co_await body.next();
    if (!chunk.ok()) co_return http::errorResponse(req, chunk.error().withContext("volume_write"));
    if (!*chunk) break;
    Status s = co_await w->append(std::move(**chunk));
    if (!s.ok()) {
      r.status = std::move(s);  // unfinished: the target is untouched
      co_return answer(std::move(r));
    }
  }
  auto info = co_await w->commit();
  if (info.ok())
    r.file = std::move(*info);
  else
    r.status = std::move(info).error();
  co_return answer(std::move(r));
}

}  // namespace vessel::cluster
