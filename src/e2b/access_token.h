#pragma once
// envd access tokens (E2B's `envdAccessToken`, sent by the SDKs as
// `X-Access-Token`): one per sandbox, the same for its whole life (pause,
// resume and a vesseld restart included), so nothing has to be stored per
// sandbox. A token is HMAC-SHA256(key, "envd-access-token:" + sandbox id) in
// hex, under a 32-byte key kept in the state directory (0600). Deleting the
// key file revokes every token at the next start.
//
// Many machines (docs/threat-model.md): only the API replicas hold the key
// (--e2b-token-key-file, the same file on each). Neither the store nor a
// node has it, so a taken-over node cannot compute another sandbox's token.
// A replica checks the token (or a /files signature) of each envd request
// before forwarding it to the sandbox's node, and vouches for it with a
// forward proof: HMAC(node token, "envd-forward:" + sandbox id), which the
// node checks in place of the token (forwarded()).
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::store {
class Store;
}

namespace vessel::e2b {

class AccessTokens {
 public:
  // Reads <state_dir>/e2b-token-key, creating it with 32 random bytes on the
  // first start. A key of any other size is an error (not replaced).
  static Result<AccessTokens> open(const std::string& state_dir);
  // The same, from a given file (created like open()'s when missing).
  static Result<AccessTokens> openFile(const std::string& path);
  // Before the key left the store (issue 24): a store that still holds
  // meta `e2b_token_key` gets it cleared, so it stops being a way to
  // compute tokens. Tokens under that key are revoked by the new key.
  static Status forgetStoredKey(store::Store& store);
  // A node: no key, so no token is computable or accepted; a request is
  // let in only with a replica's forward proof under `forward_secret`.
  static AccessTokens nodeSide(std::string forward_secret);
  // A replica's: its key, and the secret its forward proofs are made with.
  void setForwardSecret(std::string secret) { forward_secret_ = std::move(secret); }
  // For tests: a given key (32 bytes).
  static AccessTokens withKey(std::string key);

  // 64 lowercase hex digits.
  std::string forSandbox(std::string_view sandbox_id) const;
  // In constant time: whether `token` is `sandbox_id`'s token.
  bool check(std::string_view sandbox_id, std::string_view token) const;
  // E2B's `trafficAccessToken` for a sandbox created with
  // allowPublicTraffic false: the same construction under another label,
  // so it is neither the envd token nor derivable from it.
  std::string trafficForSandbox(std::string_view sandbox_id) const;
  // E2B's volume token (VolumeAndToken.token), which alone authorizes
  // /volumecontent/{volumeID}/... for that one volume of that tenant:
  // "vvt_" + hex(tenant) + "_" + HMAC(key, "volume-token:" + hex(tenant) +
  // "/" + volume id) in hex. It names its tenant (the content routes carry
  // no API key) and is bound to the volume's id, which a new volume of the
  // same name does not share; the store alone cannot make one.
  std::string forVolume(std::string_view tenant, std::string_view volume_id) const;
  // In constant time: the tenant `token` was made for, if it is
  // `volume_id`'s; nullopt for anything else (or without the key).
  std::optional<std::string> checkVolume(std::string_view volume_id, std::string_view token) const;
  // Whether this side holds the key (a node does not: forSandbox() is then
  // meaningless and must not be used to check a signature).
  bool hasKey() const { return !key_.empty(); }

  // The header a replica adds to a request it authenticated and forwards.
  static constexpr const char* kForwardHeader = "X-Vessel-Envd-Forward";
  // "" without a forward secret.
  std::string forwardProof(std::string_view sandbox_id) const;
  // A replica's proof for a sandbox on the node whose token is `secret`
  // (each node its own: cluster/node_tokens.h).
  static std::string proofUnder(std::string_view secret, std::string_view sandbox_id);
  // In constant time: whether `proof` is a replica's for `sandbox_id`.
  bool forwarded(std::string_view sandbox_id, std::string_view proof) const;

 private:
  std::string mac(std::string_view label, std::string_view sandbox_id) const;
  explicit AccessTokens(std::string key) : key_(std::move(key)) {}
  std::string key_;
  std::string forward_secret_;
};

}  // namespace vessel::e2b
