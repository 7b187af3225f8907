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

std::optional<http::Upstream> EnvdForwarder::choose(
    const boost::beast::http::request_header<>& head) {
  auto id = e2b::envd::sandboxOfRequest(head, tokens_, [&] {
    std::vector<std::string> ids;
    if (auto live = store_.listLiveSandboxes(); live.ok())
      for (const auto& sb : *live)
        if (sb.state == store::SandboxState::kRunning) ids.push_back(sb.id);
    return ids;
  });
  if (!id) return std::nullopt;
  auto node = store_.sandboxNode(*id);
  if (!node.ok() || node->empty()) return std::nullopt;
  const auto& ups = upstreams();
  auto it = ups.find(*node);
  if (it == ups.end()) return std::nullopt;
  return it->second;
}

}  // namespace vessel::vesseld
