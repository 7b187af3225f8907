#pragma once
// One call's connection to a node (remote_node.h): plain or TLS, and why
// it was cut short when cancelAll did. Shared by the calls
// (remote_node.cc) and the volume streams (remote_node_volumes.cc).
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <memory>
#include <string>

#include "client/client.h"
#include "cluster/remote_node.h"

namespace vessel::cluster {

struct RemoteNode::Flight {
  explicit Flight(asio::io_context& io) : stream(io) {}
  ~Flight() { tls.reset(); }  // before the stream it is over
  boost::beast::tcp_stream stream;
  std::unique_ptr<asio::ssl::stream<boost::beast::tcp_stream&>> tls;  // https:// nodes
  std::string cancelled;  // why, once cancelAll cut it short
  client::Url url;
};

}  // namespace vessel::cluster
