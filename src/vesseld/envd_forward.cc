#include "vesseld/envd_forward.h"

#include "e2b/envd/route.h"

namespace vessel::vesseld {

const std::map<std::string, http::Upstream>& EnvdForwarder::upstreams() {
  auto now = std::chrono::steady_clock::now();
  if (now - read_at_ < std::chrono::seconds(1)) return upstreams_;
  auto nodes = store_.listNodes();
  if (!nodes.ok()) return upstreams_;  // the last known, until the store answers
  read_at_ = now;
  upstreams_.clear();
  int64_t bound = store::nowMs() - lost_after_.count();
  for (const auto& n : *nodes) {
    if (n.lost || n.heartbeat_ms < bound || n.envd_url.empty()) continue;
    if (auto u = http::upstreamFromUrl(n.envd_url); u.ok()) upstreams_[n.name] = *u;
  }
  return upstreams_;
}

std::optional<std::string> EnvdForwarder::nodeOf(const std::string& id) {
  auto now = std::chrono::steady_clock::now();
  if (auto it = placement_.find(id); it != placement_.end()) {
    if (now - it->second.read_at < kPlacementTtl) return it->second.node;
    placement_.erase(it);
  }
  auto node = store_.sandboxNode(id);
  if (!node.ok() || node->empty()) return std::nullopt;
  // Bounded: past the cap (many sandboxes in two seconds) it starts over.
  if (placement_.size() >= kMaxPlacements) placement_.clear();
  placement_[id] = {*node, now};
  return *node;
}

std::optional<http::Upstream> EnvdForwarder::choose(boost::beast::http::request_header<>& head) {
  // Only this replica vouches: a client's own proof header goes.
  head.erase(e2b::AccessTokens::kForwardHeader);
  // Named by header or Host only: no signature is tried against every live
  // sandbox (issue 25).
  auto id = e2b::envd::sandboxOfRequest(head);
  if (!id) return std::nullopt;
  // The node cannot find a signed URL's sandbox itself (it has no key).
  head.set("E2b-Sandbox-Id", *id);
  std::string_view target = head.target();
  bool health = target.substr(0, target.find('?')) == "/health";
  // Refused here, with envd's own error (this replica's Envd has the key
  // but no agents): a node never sees an unauthenticated request.
  if (!health && !e2b::envd::authenticated(head, tokens_, *id)) return std::nullopt;
  auto node = nodeOf(*id);
  if (!node) return std::nullopt;
  const auto& ups = upstreams();
  auto it = ups.find(*node);
  if (it == ups.end()) return std::nullopt;
  if (!health) {
    const std::string& secret = node_tokens_.forNode(*node);
    if (secret.empty()) return std::nullopt;  // no token for that node: it would refuse
    head.set(e2b::AccessTokens::kForwardHeader, e2b::AccessTokens::proofUnder(secret, *id));
  }
  return it->second;
}

}  // namespace vessel::vesseld
