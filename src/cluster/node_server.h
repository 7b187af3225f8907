#pragma once
// The node API (vesseld --role=node): the ops::Node calls of this node's
// LocalNode, served over HTTP/JSON to the API replicas. Thin on purpose:
// each request is authenticated (bearer token, constant-time compare),
// parsed once (cluster/node_protocol.h) and handed to the node; the
// answer carries the outcome and what the node holds of the sandbox after
// it. Every route is POST /node/v1/<call>.
#include <string>

#include "cluster/node_protocol.h"
#include "http/server.h"
#include "ops/node.h"

namespace vessel::cluster {

namespace asio = boost::asio;

// The limits of the node listener: requests are small JSON objects.
http::ServerLimits nodeServerLimits();

class NodeServer {
 public:
  NodeServer(ops::Node& node, std::string token) : node_(node), token_(std::move(token)) {}
  void install(http::HttpServer& server);

  // One call by name on a parsed request (the HTTP layer's body; tests).
  asio::awaitable<Result<NodeReply>> call(std::string name, NodeCall c);

 private:
  // build and fork_template (node_server_templates.cc): they answer the
  // new template's manifest.
  asio::awaitable<Result<NodeReply>> templateCall(const std::string& name, const NodeCall& c);

  ops::Node& node_;
  std::string token_;
};

}  // namespace vessel::cluster
