#pragma once
// Templates copied between the nodes of a cluster on first use
// (docs/design.md, "Many machines"). A node asked to create a sandbox of a
// template it lacks fetches the template's files from a node that has it:
//
//   GET /node/v1/templates/<name>/<version>/<file>   (node API, bearer token)
//
// answers the file's bytes, streamed from disk in 1 MiB reads off the io
// thread. The fetching node writes each file into a staging directory,
// hashing as it writes (on its fetch thread, never the io thread), and
// checks the size and sha256 of every file against the manifest in the
// shared catalogue (not the sender's): a node whose copy is corrupt cannot
// pass it on. Only then is the template installed, atomically
// (TemplateStore::install); a mismatch fails the create with the file, the
// node and both checksums named, and leaves nothing installed. Concurrent
// creates of one template on one node fetch it once.
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "cluster/catalogue_signature.h"
#include "http/server.h"
#include "store/store.h"
#include "templates/catalogue.h"
#include "templates/store.h"

namespace vessel::cluster {

namespace asio = boost::asio;

inline constexpr std::string_view kTemplateFilesPrefix = "/node/v1/templates/";

// One file of one template version, as a path names it.
struct TemplateFileRef {
  std::string name, version, file;
  bool operator==(const TemplateFileRef&) const = default;
};
// The path of a file's GET, and its parser: exactly three components after
// the prefix, each 1-64 of [A-Za-z0-9._-] not starting with '.', no query.
// kInvalidArgument for anything else. Fuzzed.
std::string templateFilePath(const TemplateFileRef& f);
Result<TemplateFileRef> parseTemplateFilePath(std::string_view target);

// Whether a node's heartbeat lists `name` among its templates (NodeRecord::templates).
bool nodeHasTemplate(const store::NodeRecord& n, const std::string& name);

// The sending side: serves the files of the templates installed in `store`
// (only files its manifest lists; the sender does not check them: the
// receiver does, against the catalogue).
class TemplateFileServer {
 public:
  // Whether a presented token is another node's (per-node tokens: the
  // fetching node presents its own, which this node does not hold; see
  // peerTokenCheck). Unset: only `token` is accepted.
  using PeerCheck = std::function<bool(std::string_view token)>;
  TemplateFileServer(templates::TemplateStore& store, std::string token, PeerCheck peers = {})
      : store_(store), token_(std::move(token)), peers_(std::move(peers)) {}
  ~TemplateFileServer();
  // Installs the GET route. Before NodeServer::install on the same server:
  // the first matching prefix route takes a request.
  void install(http::HttpServer& server);

 private:
  asio::awaitable<std::optional<http::Response>> serve(const http::Request& req,
                                                       boost::beast::tcp_stream& stream);
  bool authorized(const http::Request& req) const;

  templates::TemplateStore& store_;
  std::string token_;
  PeerCheck peers_;
  int sending_ = 0;              // transfers in progress (bounded)
  asio::thread_pool reader_{1};  // file reads, off the io thread
};

// The nodes' tokens as published in the store (node_tokens.h): a token
// whose hash some node other than `self` published there. Read from the
// store at each check (a copy is rare; a node's new token counts at once).
TemplateFileServer::PeerCheck peerTokenCheck(store::Store& store, std::string self);

struct FetchOptions {
  std::string self;   // this node's name (never its own source)
  std::string token;  // this node's own token (other nodes check it: peerTokenCheck)
  // Sources are nodes whose heartbeat is newer than this.
  std::chrono::milliseconds lost_after{15000};
  // A source that sends nothing for this long is given up on.
  std::chrono::seconds idle_timeout{30};
  // Sources advertised at https:// URLs are verified with this client
  // context (vesseld --node-ca-file); without one they are refused.
  std::shared_ptr<asio::ssl::context> tls;
  // The API replicas' catalogue key (catalogue_signature.h): with it, only
  // an entry they signed is copied. Null: entries are taken as stored.
  const CatalogueVerifier* verifier = nullptr;
};

// The receiving side, on a node's io thread.
class TemplateFetcher {
 public:
  TemplateFetcher(asio::io_context& io, templates::TemplateStore& store,
                  templates::Catalogue& catalogue, store::Store& registry, FetchOptions o)
      : io_(io), store_(store), catalogue_(catalogue), registry_(registry), opts_(std::move(o)) {}
  // Abandons fetches in flight (their staging directories are removed).
  ~TemplateFetcher();

  // Makes sure the catalogue's newest version of `name` is installed here,
  // fetching it if it is not. OK as well when the catalogue has no such
  // template (the caller's open() then says what is wrong) or cannot be
  // read (the installed versions are used, as on one machine).
  asio::awaitable<Status> ensure(std::string name);
  // How many templates this fetcher installed (tests, logs).
  int fetched() const { return fetched_; }

 private:
  struct Flight;
  asio::awaitable<Status> fetch(templates::CatalogueEntry e);

  asio::io_context& io_;
  templates::TemplateStore& store_;
  templates::Catalogue& catalogue_;
  store::Store& registry_;
  FetchOptions opts_;
  std::map<std::string, std::shared_ptr<Flight>> flights_;  // by name@version
  int fetched_ = 0;
  std::shared_ptr<std::atomic<bool>> stop_ = std::make_shared<std::atomic<bool>>(false);
  asio::thread_pool pool_{1};  // downloads: writes and hashing off the io thread
};

// The blocking part of a fetch (the fetch thread; tests): every file of
// `e` from the node API at `url` into `staging`, each checked against `e`;
// over TLS, verified with `tls`, when `url` is https://.
// The files' stamps and checksums (by file name) for TemplateStore::install.
Result<std::map<std::string, templates::TemplateStore::HashedFile>> downloadTemplate(
    const std::string& url, const std::string& token, const templates::CatalogueEntry& e,
    const std::string& staging, std::chrono::seconds idle_timeout, const std::atomic<bool>& stop,
    std::shared_ptr<asio::ssl::context> tls = nullptr);

}  // namespace vessel::cluster
