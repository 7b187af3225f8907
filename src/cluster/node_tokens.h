#pragma once
// Which secret authenticates an API replica to which node (issue 24, item
// 5). Each node holds only its own token (--node-token-file), so a node
// host that is taken over can call no other node's API and mint no envd
// forward proof another node accepts. The API replicas hold every node's
// token in one file (--node-tokens-file, lines "NAME TOKEN"; `vessel node
// token NAME` makes a line). A cluster that has not moved to per-node tokens
// yet keeps one shared token (--node-token-file on the replicas too): every
// node then accepts every other's token, which docs/operations.md says is
// the weaker setup.
#include <map>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::cluster {

// Shortest token accepted anywhere (the shared token's old rule too).
inline constexpr size_t kMinNodeTokenSize = 16;

class NodeTokens {
 public:
  NodeTokens() = default;
  // Every node has `token`.
  static NodeTokens shared(std::string token);
  // The per-node file's text: "NAME TOKEN" a line, blank lines and '#'
  // comments ignored; names are id characters, each named once, tokens at
  // least kMinNodeTokenSize printable characters. An operator's file, but
  // still bounded (1 MiB, 4096 nodes) and every bad line named.
  static Result<NodeTokens> parse(std::string_view text);
  static Result<NodeTokens> readFile(const std::string& path);

  // `name`'s token; "" when this replica knows none for it (per-node file
  // without that node: the node is not placed on, its calls fail).
  const std::string& forNode(std::string_view name) const;
  bool perNode() const { return shared_.empty(); }
  bool empty() const { return shared_.empty() && tokens_.empty(); }
  size_t size() const { return tokens_.size(); }

 private:
  std::string shared_;
  std::map<std::string, std::string, std::less<>> tokens_;
};

// A new node token: 32 random bytes as 64 hex digits.
Result<std::string> newNodeToken();
// What a node publishes of its token so that other nodes can check it
// (template copies, template_transfer.h): its SHA-256, under the store
// meta key nodeTokenMetaKey(name). A hash cannot be presented as the token.
std::string nodeTokenHash(std::string_view token);
std::string nodeTokenMetaKey(std::string_view node_name);

}  // namespace vessel::cluster
