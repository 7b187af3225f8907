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
#include <boost/beast/http/message.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "e2b/access_token.h"
#include "http/forward.h"
#include "store/store.h"

namespace vessel::vesseld {

class EnvdForwarder {
 public:
  EnvdForwarder(store::Store& store, const e2b::AccessTokens& tokens,
                std::chrono::milliseconds lost_after)
      : store_(store), tokens_(tokens), lost_after_(lost_after) {}

  // HttpServer::forwardWhen's chooser.
  std::optional<http::Upstream> choose(const boost::beast::http::request_header<>& head);

 private:
  // The registry's envd upstreams of live nodes, read again after a second.
  const std::map<std::string, http::Upstream>& upstreams();

  store::Store& store_;
  const e2b::AccessTokens& tokens_;
  std::chrono::milliseconds lost_after_;
  std::map<std::string, http::Upstream> upstreams_;  // by node name
  std::chrono::steady_clock::time_point read_at_{};
};

}  // namespace vessel::vesseld
