#pragma once
// E2B envd on many machines (docs/design.md, "Many machines"): clients use
// one E2B_SANDBOX_URL, an API replica's envd listener, for every sandbox,
// but a sandbox's agent lives on its node. Each node serves envd for its
// own sandboxes (--e2b-envd-advertise, recorded in the registry), and an
// API replica forwards each request to the node running the sandbox it
// names (e2b/envd/route.h), request by request (one keep-alive connection
// of an SDK carries requests for many sandboxes). A request that names no
// sandbox with a live node is answered by the replica itself: an Envd
// with no agents, so the errors are envd's own ("not running").
//
// Placement is asked of the store only for a request whose token or
// signature checked (so a stranger's ids cost no read), and then kept in
// memory for a short while: an SDK's requests for one sandbox cost one
// store read per kPlacementTtl, not one each (issue 25). This replica's
// own state changes forget a sandbox's entry at once (forget()).
#include <boost/beast/http/message.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "cluster/node_tokens.h"
#include "e2b/access_token.h"
#include "http/forward.h"
#include "store/store.h"

namespace vessel::vesseld {

class EnvdForwarder {
 public:
  // `node_tokens`: each node's token, the secret of the forward proofs that
  // node accepts (so a proof made for one node opens no other).
  EnvdForwarder(store::Store& store, const e2b::AccessTokens& tokens,
                cluster::NodeTokens node_tokens, std::chrono::milliseconds lost_after)
      : store_(store),
        tokens_(tokens),
        node_tokens_(std::move(node_tokens)),
        lost_after_(lost_after) {}

  // HttpServer::forwardWhen's chooser: a request it forwards carries this
  // replica's forward proof for its sandbox under its node's token (it
  // checked the access token first).
  std::optional<http::Upstream> choose(boost::beast::http::request_header<>& head);
  // A sandbox's state changed here (the operation log's hook): its
  // placement is read again on its next request.
  void forget(const std::string& id) { placement_.erase(id); }

  static constexpr std::chrono::seconds kPlacementTtl{2};
  static constexpr size_t kMaxPlacements = 65536;
  size_t placementsKept() const { return placement_.size(); }

 private:
  // The node running `id`, from memory or, past its time, from the store.
  std::optional<std::string> nodeOf(const std::string& id);

  // The registry's envd upstreams of live nodes, read again after a second.
  const std::map<std::string, http::Upstream>& upstreams();

  store::Store& store_;
  const e2b::AccessTokens& tokens_;
  cluster::NodeTokens node_tokens_;
  std::chrono::milliseconds lost_after_;
  std::map<std::string, http::Upstream> upstreams_;  // by node name
  struct Placement {
    std::string node;
    std::chrono::steady_clock::time_point read_at;
  };
  std::unordered_map<std::string, Placement> placement_;  // by sandbox id
  std::chrono::steady_clock::time_point read_at_{};
};

}  // namespace vessel::vesseld
