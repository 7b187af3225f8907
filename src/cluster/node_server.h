#pragma once
// The node API (vesseld --role=node): the ops::Node calls of this node's
// LocalNode, served over HTTP/JSON to the API replicas. Thin on purpose:
// each request is authenticated (bearer token, constant-time compare),
// parsed once (cluster/node_protocol.h) and handed to the node; the
// answer carries the outcome and what the node holds of the sandbox after
// it. Every route is POST /node/v1/<call>. A volume's calls are served by
// this node's ops::VolumeKeeper, the one a single machine's volumes API
// uses: a replica's files API reaches the same code here.
#include <functional>
#include <optional>
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
  // This node's volumes (its local keeper, api/local_volumes.h) and their
  // mounts in its sandboxes (null: none can be mounted here), for the
  // volume_* calls; unset, they are refused (kUnavailable).
  void setVolumes(ops::VolumeKeeper* keeper, ops::VolumeMounter* mounter) {
    keeper_ = keeper;
    mounter_ = mounter;
  }
  void install(http::HttpServer& server);

  // One call by name on a parsed request (the HTTP layer's body; tests).
  asio::awaitable<Result<NodeReply>> call(std::string name, NodeCall c);

  // The volume calls (node_server_volumes.cc), by name; false for none.
  static bool isVolumeCall(std::string_view name);

 private:
  using Refusal = std::function<std::optional<http::Response>(const http::Request&)>;
  // build and fork_template (node_server_templates.cc): they answer the
  // new template's manifest.
  asio::awaitable<Result<NodeReply>> templateCall(const std::string& name, const NodeCall& c);
  // volume_* but the streams (node_server_volumes.cc).
  asio::awaitable<Result<NodeReply>> volumeCall(const std::string& name, NodeCall c);
  // volume_read (the file as the response's chunked body) and
  // volume_write (the file as the request's body), behind `refused`.
  void installVolumeStreams(http::Router& r, const Refusal& refused);
  asio::awaitable<std::optional<http::Response>> readStream(const http::Request& req,
                                                            boost::beast::tcp_stream& stream);
  asio::awaitable<http::Response> writeStream(const http::Request& req, http::BodyReader& body);

  ops::Node& node_;
  std::string token_;
  ops::VolumeKeeper* keeper_ = nullptr;
  ops::VolumeMounter* mounter_ = nullptr;
};

}  // namespace vessel::cluster
