#pragma once
// An API replica's client of one node's API (cluster/node_server.h): each
// call is one POST on its own connection, bounded by a deadline, and can
// be cut short with every other call in flight when the node is declared
// lost (cancelAll), so no operation waits on a node that is gone. A node
// advertised at an https:// URL is reached over TLS, its certificate
// verified (http/tls_client.h) before the request and its token are sent.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "cluster/node_protocol.h"
#include "ops/volume_keeper.h"

namespace vessel::cluster {

namespace asio = boost::asio;

class RemoteNode {
 public:
  // `tls`: the client context https:// nodes are verified with; null
  // refuses them.
  RemoteNode(asio::io_context& io, std::string name, std::string url, std::string token,
             std::shared_ptr<asio::ssl::context> tls = nullptr)
      : io_(io),
        name_(std::move(name)),
        url_(std::move(url)),
        token_(std::move(token)),
        tls_(std::move(tls)) {}
  ~RemoteNode() { cancelAll("the API replica is stopping"); }

  const std::string& name() const { return name_; }
  const std::string& url() const { return url_; }
  void setUrl(std::string url) { url_ = std::move(url); }

  // POST /node/v1/<call>. The node's answer (which may itself carry a
  // failed Status), or kUnavailable when the node could not be reached,
  // timed out or was cancelled. `*connected` says whether the request may
  // have reached the node (false: it certainly did not, try another).
  // `max_reply`: the answer's bound (a volume's listing may be long).
  asio::awaitable<Result<NodeReply>> call(std::string call, NodeCall c,
                                          std::chrono::milliseconds timeout,
                                          bool* connected = nullptr, size_t max_reply = 1 << 20);
  // volume_read: the file as the node reads it, piece by piece (each read
  // bounded by `timeout`); the node's refusal before its first byte is
  // the call's Error (remote_node_volumes.cc).
  asio::awaitable<Result<std::unique_ptr<ops::VolumeReader>>> readVolume(
      NodeCall c, std::chrono::milliseconds timeout);
  // volume_write: the file sent as it is appended, made whole by commit().
  // The node opens the file before any of it is sent (Expect:
  // 100-continue), so a refusal is the call's Error.
  asio::awaitable<Result<std::unique_ptr<ops::VolumeWriter>>> writeVolume(
      NodeCall c, std::chrono::milliseconds timeout);
  // Fails every call in flight with `why` (open reads and writes too).
  void cancelAll(const std::string& why);
  size_t inFlight() const { return in_flight_.size(); }

  struct Flight;  // remote_node_internal.h
  // A stream's flight is done (its reader or writer went).
  void land(const std::shared_ptr<Flight>& f);

 private:
  // A connection to the node for `call`, its TLS handshake done, in
  // flight (cancelAll cuts it) until land().
  asio::awaitable<Result<std::shared_ptr<Flight>>> connect(const std::string& call,
                                                           std::chrono::milliseconds timeout,
                                                           bool* connected);

  asio::io_context& io_;
  std::string name_, url_, token_;
  std::shared_ptr<asio::ssl::context> tls_;
  std::set<std::shared_ptr<Flight>> in_flight_;
};

}  // namespace vessel::cluster
