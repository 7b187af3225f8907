#include "cluster/template_transfer.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <vector>

#include "base/fd.h"
#include "base/log.h"
#include "base/offload.h"
#include "client/client.h"
#include "cluster/node_protocol.h"
#include "cluster/node_tokens.h"
#include "http/tls_client.h"

namespace vessel::cluster {

namespace beast = boost::beast;
namespace fs = std::filesystem;
using tcp = asio::ip::tcp;

namespace {

constexpr size_t kChunk = 1 << 20;
constexpr int kMaxSending = 8;

Logger transferLog() { return Logger("template-copy"); }

bool component(std::string_view s) {
  if (s.empty() || s.size() > 64 || s[0] == '.') return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  return true;
}

std::string hex(const unsigned char* d, unsigned n) {
  static const char* k = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < n; ++i) {
    s.push_back(k[d[i] >> 4]);
    s.push_back(k[d[i] & 15]);
  }
  return s;
}

std::string randomSuffix() {
  unsigned char b[6];
  if (::getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) return "000000";
  return hex(b, sizeof b);
}

}  // namespace

std::string templateFilePath(const TemplateFileRef& f) {
  return std::string(kTemplateFilesPrefix) + f.name + "/" + f.version + "/" + f.file;
}

Result<TemplateFileRef> parseTemplateFilePath(std::string_view target) {
  auto bad = [](const std::string& why) {
    return Error(Code::kInvalidArgument, "template file path: " + why);
  };
  if (target.size() > 512) return bad("too long");
  if (target.substr(0, kTemplateFilesPrefix.size()) != kTemplateFilesPrefix)
    return bad("not under " + std::string(kTemplateFilesPrefix));
  std::string_view rest = target.substr(kTemplateFilesPrefix.size());
  std::string_view parts[3];
  for (int i = 0; i < 3; ++i) {
    size_t slash = rest.find('/');
    if (i < 2 && slash == std::string_view::npos) return bad("needs <name>/<version>/<file>");
    if (i == 2 && slash != std::string_view::npos) return bad("needs <name>/<version>/<file>");
    parts[i] = rest.substr(0, slash);
    if (!component(parts[i])) return bad("a component has characters names do not have");
    rest = i < 2 ? rest.substr(slash + 1) : std::string_view();
  }
  return TemplateFileRef{std::string(parts[0]), std::string(parts[1]), std::string(parts[2])};
}

bool nodeHasTemplate(const store::NodeRecord& n, const std::string& name) {
  return std::find(n.templates.begin(), n.templates.end(), name) != n.templates.end();
}

// --- The sending side -----------------------------------------------------

TemplateFileServer::~TemplateFileServer() {
  reader_.stop();
  reader_.join();
}

bool TemplateFileServer::authorized(const http::Request& req) const {
  auto auth = req[http::field::authorization];
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.size() <= kBearer.size() || auth.substr(0, kBearer.size()) != kBearer) return false;
  std::string_view presented(auth.data() + kBearer.size(), auth.size() - kBearer.size());
  return tokenMatches(presented, token_) || (peers_ && peers_(presented));
}

TemplateFileServer::PeerCheck peerTokenCheck(store::Store& store, std::string self) {
  return [&store, self = std::move(self)](std::string_view token) {
    if (token.size() < kMinNodeTokenSize) return false;
    auto nodes = store.listNodes();
    if (!nodes.ok()) return false;
    const std::string hash = nodeTokenHash(token);
    for (const auto& n : *nodes) {
      if (n.name == self) continue;
      auto published = store.getMeta(nodeTokenMetaKey(n.name));
      // Hashes are public within the cluster; the compare is constant-time anyway.
      if (published.ok() && *published && tokenMatches(hash, **published)) return true;
    }
    return false;
  };
}

// One route: GET <prefix>{name}/{version}/{file}; serve() checks the token
// and the path's components (parseTemplateFilePath), the guard the token of
// what the router refuses itself.
void TemplateFileServer::install(http::HttpServer& server) {
  http::Router& r = server.router();
  r.guardUnder(std::string(kTemplateFilesPrefix),
               [this](const http::Request& req) -> std::optional<http::Response> {
                 if (!authorized(req))
                   return http::errorResponse(
                       req, Error(Code::kUnauthenticated, "template copies need a node's token"));
                 return std::nullopt;
               });
  r.addStream(http::verb::get, std::string(kTemplateFilesPrefix) + "{name}/{version}/{file}",
              [this](const http::Request& req, const http::Params&, beast::tcp_stream& stream) {
                return serve(req, stream);
              });
}

asio::awaitable<std::optional<http::Response>> TemplateFileServer::serve(
    const http::Request& req, beast::tcp_stream& stream) {
  if (!authorized(req))
    co_return http::errorResponse(
        req, Error(Code::kUnauthenticated, "template copies need a node's token"));
  std::string_view target(req.target().data(), req.target().size());
  if (req.method() != http::verb::get) co_return http::methodNotAllowed(req, target, "GET");
  auto ref = parseTemplateFilePath(target);
  if (!ref.ok()) co_return http::errorResponse(req, ref.error());
  const std::string dir = store_.root() + "/" + ref->name + "/" + ref->version;
  const std::string id = ref->name + "@" + ref->version;
  // Only a file the installed manifest lists; the manifest is not checked
  // against the catalogue here (the receiver checks every byte).
  auto text = readFile(dir + "/" + templates::kManifestFile, 64 * 1024);
  if (!text.ok())
    co_return http::errorResponse(req, Error(Code::kNotFound, "template " + id + " is not here"));
  auto m = templates::parseManifest(*text);
  if (!m.ok() || m->name != ref->name || m->version != ref->version || !m->files.count(ref->file))
    co_return http::errorResponse(
        req, Error(Code::kNotFound, "template " + id + " has no file " + ref->file + " here"));
  if (sending_ >= kMaxSending)
    co_return http::errorResponse(
        req, Error(Code::kUnavailable, "this node is sending too many templates; try another"));
  auto fd = Fd::open(dir + "/" + ref->file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st {};
  if (!fd.ok() || ::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode))
    co_return http::errorResponse(
        req, Error(Code::kNotFound, "template " + id + ": cannot read " + ref->file));
  ++sending_;
  struct Count {
    int& n;
    ~Count() { --n; }
  } count{sending_};
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  http::response<http::buffer_body> res{http::status::ok, req.version()};
  res.set(http::field::content_type, "application/octet-stream");
  res.content_length(size);
  res.keep_alive(false);
  res.body().data = nullptr;
  res.body().more = true;
  http::response_serializer<http::buffer_body> sr{res};
  stream.expires_after(std::chrono::seconds(60));
  auto [hec, hn] =
      co_await http::async_write_header(stream, sr, asio::as_tuple(asio::use_awaitable));
  if (hec) co_return std::nullopt;
  auto buf = std::make_shared<std::vector<char>>(kChunk);
  auto file = std::make_shared<Fd>(std::move(*fd));
  uint64_t off = 0;
  while (off < size) {
    // Disk reads (GiBs of a template's memory) on the reader thread.
    // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
    auto read = [buf, file, off, size]() -> ssize_t {
      size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, size - off));
      return ::pread(file->get(), buf->data(), want, static_cast<off_t>(off));
    };
    ssize_t n = co_await offload(reader_, std::move(read));
    // A file that shrank: the receiver finds the body short and refuses it.
    if (n <= 0) break;
    res.body().data = buf->data();
    res.body().size = static_cast<size_t>(n);
    res.body().more = true;
    stream.expires_after(std::chrono::seconds(60));
    auto [wec, wn] = co_await http::async_write(stream, sr, asio::as_tuple(asio::use_awaitable));
    if (wec && wec != http::error::need_buffer) co_return std::nullopt;
    off += static_cast<uint64_t>(n);
  }
  if (off == size) {
    res.body().data = nullptr;
    res.body().more = false;
    auto [eec, en] = co_await http::async_write(stream, sr, asio::as_tuple(asio::use_awaitable));
    (void)eec;
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  co_return std::nullopt;
}

// --- The receiving side ---------------------------------------------------

namespace {

// What one file's download needs besides its connection.
struct FileWant {
  const client::Url& url;
  const std::string& token;
  const TemplateFileRef& ref;
  uint64_t size;
  const std::string& sha;
  const std::string& path;
  std::chrono::seconds idle;
  const std::atomic<bool>& stop;
  const std::string& what;  // "file F of template N@V", for errors
};

// One file into `w.path` over `stream` (plain, or TLS over `tcp`), hashed
// as it is written; its size and sha256 must be the catalogue's.
// Long because the request, the response head's checks and the body's
// hashed write are one stream that must fail as one.
template <class Stream>
asio::awaitable<Result<templates::TemplateStore::HashedFile>> receiveFile(Stream& stream,
                                                                          beast::tcp_stream& tcp,
                                                                          FileWant w) {
  const auto& url = w.url;
  const auto& ref = w.ref;
  const auto& path = w.path;
  const auto& what = w.what;
  const auto& stop = w.stop;
  const uint64_t want_size = w.size;
  const auto idle = w.idle;
  auto fail = [&](Code c, const std::string& why) { return Error(c, what + ": " + why); };
  http::request<http::empty_body> req{http::verb::get, url.base_path + templateFilePath(ref), 11};
  req.set(http::field::host, url.host);
  req.set(http::field::authorization, "Bearer " + w.token);
  tcp.expires_after(idle);
  auto [wec, wn] = co_await http::async_write(stream, req, asio::as_tuple(asio::use_awaitable));
  if (wec) co_return fail(Code::kUnavailable, "send: " + wec.message());
  beast::flat_buffer buf;
  http::response_parser<http::buffer_body> p;
  p.body_limit(std::max<uint64_t>(want_size, 64 * 1024));  // an error body may be larger
  auto [hec, hn] =
      co_await http::async_read_header(stream, buf, p, asio::as_tuple(asio::use_awaitable));
  if (hec) co_return fail(Code::kUnavailable, "receive: " + hec.message());
  std::vector<char> chunk(kChunk);
  if (p.get().result() != http::status::ok) {
    // The error's JSON, bounded.
    std::string body;
    while (!p.is_done() && body.size() < 64 * 1024) {
      p.get().body().data = chunk.data();
      p.get().body().size = chunk.size();
      auto [rec2, rn] =
          co_await http::async_read(stream, buf, p, asio::as_tuple(asio::use_awaitable));
      body.append(chunk.data(), chunk.size() - p.get().body().size);
      if (rec2 && rec2 != http::error::need_buffer) break;
    }
    client::HttpResponse hr{p.get().result_int(), "", body};
    co_return client::errorFromResponse(hr).withContext(what);
  }
  if (auto len = p.content_length(); !len || *len != want_size)
    co_return fail(Code::kFailedPrecondition,
                   "the sender has " + (len ? std::to_string(*len) : std::string("?")) +
                       " bytes, the catalogue's manifest says " + std::to_string(want_size));
  VESSEL_CO_ASSIGN_OR_RETURN(Fd out, Fd::open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!md || EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr) != 1)
    co_return fail(Code::kInternal, "sha256 init");
  uint64_t got = 0;
  while (!p.is_done()) {
    if (stop.load()) co_return fail(Code::kUnavailable, "the node is stopping");
    p.get().body().data = chunk.data();
    p.get().body().size = chunk.size();
    tcp.expires_after(idle);
    auto [bec, bn] = co_await http::async_read(stream, buf, p, asio::as_tuple(asio::use_awaitable));
    if (bec && bec != http::error::need_buffer)
      co_return fail(Code::kUnavailable, "receive after " + std::to_string(got) + " of " +
                                             std::to_string(want_size) +
                                             " bytes: " + bec.message());
    size_t n = chunk.size() - p.get().body().size;
    for (size_t at = 0; at < n;) {
      ssize_t w = ::write(out.get(), chunk.data() + at, n - at);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) co_return Error::fromErrno("write " + path).withContext(what);
      at += static_cast<size_t>(w);
    }
    EVP_DigestUpdate(md.get(), chunk.data(), n);
    got += n;
  }
  if (got != want_size)
    co_return fail(Code::kFailedPrecondition, "received " + std::to_string(got) +
                                                  " bytes, the catalogue's manifest says " +
                                                  std::to_string(want_size));
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned dn = 0;
  EVP_DigestFinal_ex(md.get(), d, &dn);
  std::string sha = hex(d, dn);
  if (sha != w.sha)
    co_return fail(Code::kFailedPrecondition, "sha256 " + sha + ", the catalogue's manifest says " +
                                                  w.sha + "; the copy is refused");
  if (::fsync(out.get()) != 0) co_return Error::fromErrno("fsync " + path).withContext(what);
  out.reset();
  VESSEL_CO_ASSIGN_OR_RETURN(auto stamp, templates::TemplateStore::stampFile(path));
  co_return templates::TemplateStore::HashedFile{stamp, std::move(sha)};
}

// One file from the node at `url` (TLS when https://, verified with `tls`)
// into `path`. On the fetch thread's own io_context.
asio::awaitable<Result<templates::TemplateStore::HashedFile>> downloadFile(
    const client::Url& url, std::string token, TemplateFileRef ref, uint64_t want_size,
    std::string want_sha, std::string path, std::chrono::seconds idle,
    const std::atomic<bool>& stop, std::shared_ptr<asio::ssl::context> tls) {
  auto ex = co_await asio::this_coro::executor;
  const std::string what = "file " + ref.file + " of template " + ref.name + "@" + ref.version;
  auto fail = [&](Code c, const std::string& why) { return Error(c, what + ": " + why); };
  tcp::resolver resolver(ex);
  auto [rec, eps] = co_await resolver.async_resolve(url.host, std::to_string(url.port),
                                                    asio::as_tuple(asio::use_awaitable));
  if (rec) co_return fail(Code::kUnavailable, "resolve: " + rec.message());
  beast::tcp_stream stream(ex);
  stream.expires_after(std::chrono::seconds(3));
  auto [cec, ep] = co_await stream.async_connect(eps, asio::as_tuple(asio::use_awaitable));
  if (cec) co_return fail(Code::kUnavailable, "connect: " + cec.message());
  FileWant want{url, token, ref, want_size, want_sha, path, idle, stop, what};
  if (!url.tls) co_return co_await receiveFile(stream, stream, want);
  if (!tls)
    co_return fail(Code::kUnavailable, "an https:// node and no TLS client (--node-ca-file)");
  asio::ssl::stream<beast::tcp_stream&> secure(stream, *tls);
  vessel::http::expectServer(secure.native_handle(), url.host);
  auto [hec] = co_await secure.async_handshake(asio::ssl::stream_base::client,
                                               asio::as_tuple(asio::use_awaitable));
  // Refused before the token is sent: a node whose certificate is not the
  // operator's CA's is no source.
  if (hec)
    co_return fail(Code::kUnavailable,
                   "TLS: " + vessel::http::handshakeError(secure.native_handle(), hec));
  co_return co_await receiveFile(secure, stream, want);
}

}  // namespace

Result<std::map<std::string, templates::TemplateStore::HashedFile>> downloadTemplate(
    const std::string& url, const std::string& token, const templates::CatalogueEntry& e,
    const std::string& staging, std::chrono::seconds idle_timeout, const std::atomic<bool>& stop,
    std::shared_ptr<asio::ssl::context> tls) {
  auto u = client::parseUrl(url);
  if (!u.ok()) return std::move(u).error();
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) return Error(Code::kInternal, "create " + staging + ": " + ec.message());
  std::map<std::string, templates::TemplateStore::HashedFile> out;
  for (const auto& kv : e.manifest.files) {
    // Not a structured binding: the lambdas below capture these (CONTRIBUTING.md
    // "Coroutines under g++ 12" rule 4).
    const std::string& file = kv.first;
    const std::string& sha = kv.second;
    auto size = e.sizes.find(file);
    if (size == e.sizes.end())
      return Error(Code::kInvalidArgument, "the catalogue has no size for " + file);
    asio::io_context io;
    std::optional<Result<templates::TemplateStore::HashedFile>> r;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
          TemplateFileRef ref{e.manifest.name, e.manifest.version, file};
          std::string path = staging + "/" + file;
          r.emplace(co_await downloadFile(*u, token, ref, size->second, sha, path, idle_timeout,
                                          stop, tls));
        },
        [&](const std::exception_ptr& ex) {
          if (ex && !r) r.emplace(Error(Code::kInternal, "download " + file + ": exception"));
        });
    // Polled, so that a stopping node does not wait out a silent sender.
    while (!r && !stop.load()) {
      if (io.run_for(std::chrono::milliseconds(100)) == 0 && io.stopped()) break;
    }
    if (!r) return Error(Code::kUnavailable, "the node is stopping");
    if (!r->ok()) return std::move(*r).error();
    out[file] = std::move(**r);
  }
  return out;
}

struct TemplateFetcher::Flight {
  explicit Flight(asio::io_context& io) : done(io, asio::steady_timer::time_point::max()) {}
  asio::steady_timer done;  // cancelled when the fetch ends
  std::optional<Status> result;
};

TemplateFetcher::~TemplateFetcher() {
  stop_->store(true);
  pool_.join();
}

asio::awaitable<Status> TemplateFetcher::ensure(std::string name) {
  auto e = catalogue_.get(name, "");
  if (!e.ok()) {
    transferLog().warn("template {}: the catalogue cannot be read ({}); using what is here", name,
                       e.error().message());
    co_return okStatus();
  }
  if (!*e) co_return okStatus();
  const auto& m = (*e)->manifest;
  const std::string id = m.name + "@" + m.version;
  auto here = store_.open(m.name, m.version);
  if (here.ok()) co_return okStatus();
  if (here.error().code() != Code::kNotFound) co_return std::move(here).error();
  if (opts_.verifier) {
    // Only now that a copy is needed: entries of templates each node makes
    // itself (the built-in ones) are never signed.
    auto v = verifiedEntry(registry_, *opts_.verifier, m.name, m.version);
    if (!v.ok()) co_return std::move(v).error().withContext("copy template " + id);
    **e = std::move(*v);
  }
  if (m.qemu_version != store_.qemuVersion() || m.kernel_sha256 != store_.kernelSha256())
    co_return Error(Code::kFailedPrecondition,
                    "template " + id + " was made with QEMU '" + m.qemu_version +
                        "' and another guest kernel than this node's (QEMU '" +
                        store_.qemuVersion() + "'); it cannot be copied here");
  if (auto it = flights_.find(id); it != flights_.end()) {
    auto f = it->second;  // one fetch per template: wait for it
    boost::system::error_code ec;
    co_await f->done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_return f->result.value_or(Error(Code::kUnavailable, "copy of template " + id + " ended"));
  }
  auto f = std::make_shared<Flight>(io_);
  flights_[id] = f;
  Status s = co_await fetch(std::move(**e));
  f->result = s;
  f->done.cancel();
  flights_.erase(id);
  co_return s;
}

asio::awaitable<Status> TemplateFetcher::fetch(templates::CatalogueEntry e) {
  const std::string id = e.manifest.name + "@" + e.manifest.version;
  VESSEL_CO_ASSIGN_OR_RETURN(auto nodes, registry_.listNodes());
  int64_t now = store::nowMs();
  // Nodes whose heartbeat lists it first; then the other live nodes, since
  // a heartbeat is up to 2 s behind a build that just finished (a node
  // without it answers 404 at once).
  std::vector<store::NodeRecord> sources;
  for (bool listed : {true, false})
    for (const auto& n : nodes)
      if (n.name != opts_.self && !n.lost && n.heartbeat_ms >= now - opts_.lost_after.count() &&
          nodeHasTemplate(n, e.manifest.name) == listed)
        sources.push_back(n);
  Error last(Code::kUnavailable,
             "template " + id + " is not here and no live node has it to copy from");
  for (const auto& src : sources) {
    // Named like a build's staging, so it counts against its tenant's disk.
    std::string staging =
        store_.root() + "/.staging-" + e.manifest.name + "-copy-" + randomSuffix();
    transferLog().info("copying template {} ({} bytes) from node {}", id, e.totalBytes(), src.name);
    auto stop = stop_;
    auto download = [url = src.advertise_url, token = opts_.token, e, staging,
                     idle = opts_.idle_timeout, stop, tls = opts_.tls] {
      auto r = downloadTemplate(url, token, e, staging, idle, *stop, tls);
      if (!r.ok()) {
        std::error_code ec;
        fs::remove_all(staging, ec);  // nothing of a refused copy stays
      }
      return r;
    };
    auto got = co_await offload(pool_, std::move(download));
    if (got.ok()) {
      auto t = store_.install(staging, e.manifest, *got);
      if (t.ok()) {
        ++fetched_;
        transferLog().info("template {} copied from node {} and checked", id, src.name);
        co_return okStatus();
      }
      std::error_code ec;
      fs::remove_all(staging, ec);
      // Installed meanwhile by another path (a build): what is there wins.
      if (t.error().code() == Code::kAlreadyExists) co_return okStatus();
      co_return std::move(t).error().withContext("install copied template " + id);
    }
    if (got.error().code() == Code::kNotFound) continue;  // not there either
    last = std::move(got).error().withContext("copy template " + id + " from node " + src.name);
    transferLog().warn("{}", last.message());
  }
  co_return last;
}

}  // namespace vessel::cluster
