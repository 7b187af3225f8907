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
  asio::awaitable<Result<NodeReply>> call(std::string call, NodeCall c,
                                          std::chrono::milliseconds timeout,
                                          bool* connected = nullptr);
  // Fails every call in flight with `why`.
  void cancelAll(const std::string& why);
  size_t inFlight() const { return in_flight_.size(); }

  struct Flight;

 private:
  asio::io_context& io_;
  std::string name_, url_, token_;
  std::shared_ptr<asio::ssl::context> tls_;
  std::set<std::shared_ptr<Flight>> in_flight_;
};

}  // namespace vessel::cluster
