#include "cluster/node_tokens.h"

#include <openssl/rand.h>

#include <cctype>
#include <fstream>
#include <iterator>

#include "base/hex.h"
#include "base/sha256.h"
#include "base/split.h"

namespace vessel::cluster {

namespace {

constexpr size_t kMaxFileBytes = 1 << 20;
constexpr size_t kMaxNodes = 4096;
constexpr size_t kMaxName = 128;
constexpr size_t kMaxToken = 512;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool idChars(std::string_view s) {
  if (s.empty() || s.size() > kMaxName) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

bool tokenChars(std::string_view s) {
  if (s.size() < kMinNodeTokenSize || s.size() > kMaxToken) return false;
  for (char c : s)
    if (c <= ' ' || c > '~') return false;
  return true;
}

}  // namespace

NodeTokens NodeTokens::shared(std::string token) {
  NodeTokens t;
  t.shared_ = std::move(token);
  return t;
}

Result<NodeTokens> NodeTokens::parse(std::string_view text) {
  if (text.size() > kMaxFileBytes) return Error(Code::kInvalidArgument, "node tokens: over 1 MiB");
  NodeTokens t;
  size_t line_no = 0;
  for (std::string_view line : splitView(text, '\n')) {
    ++line_no;
    std::string_view l = trim(line);
    if (l.empty() || l.front() == '#') continue;
    auto sp = l.find_first_of(" \t");
    std::string_view name = l.substr(0, sp);
    std::string_view token = sp == std::string_view::npos ? "" : trim(l.substr(sp));
    auto where = "node tokens, line " + std::to_string(line_no) + ": ";
    if (!idChars(name))
      return Error(Code::kInvalidArgument,
                   where + "a node name of letters, digits, '-', '_' and '.' comes first");
    if (!tokenChars(token))
      return Error(Code::kInvalidArgument,
                   where + "node " + std::string(name) + " needs a token of " +
                       std::to_string(kMinNodeTokenSize) +
                       " to 512 printable characters (vessel node token NAME makes one)");
    if (t.tokens_.size() >= kMaxNodes)
      return Error(Code::kInvalidArgument, where + "more than 4096 nodes");
    if (!t.tokens_.emplace(std::string(name), std::string(token)).second)
      return Error(Code::kInvalidArgument, where + "node " + std::string(name) + " named twice");
  }
  if (t.tokens_.empty())
    return Error(Code::kInvalidArgument, "node tokens: no node (lines are \"NAME TOKEN\")");
  return t;
}

Result<NodeTokens> NodeTokens::readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(Code::kInvalidArgument, path + ": cannot read it");
  std::string text;
  text.resize(kMaxFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  auto t = parse(text);
  if (!t.ok()) return std::move(t).error().withContext(path);
  return t;
}

const std::string& NodeTokens::forNode(std::string_view name) const {
  static const std::string kNone;
  if (!shared_.empty()) return shared_;
  auto it = tokens_.find(name);
  return it == tokens_.end() ? kNone : it->second;
}

Result<std::string> newNodeToken() {
  unsigned char b[32];
  if (RAND_bytes(b, sizeof(b)) != 1) return Error(Code::kInternal, "RAND_bytes failed");
  return hexEncode(std::string_view(reinterpret_cast<const char*>(b), sizeof(b)));
}

std::string nodeTokenHash(std::string_view token) {
  // A label: the hash of a node token is never the hash of anything else.
  std::string msg = "vessel-node-token:";
  msg.append(token);
  return sha256Hex(msg);
}

std::string nodeTokenMetaKey(std::string_view node_name) {
  return "node_token_sha256:" + std::string(node_name);
}

}  // namespace vessel::cluster
