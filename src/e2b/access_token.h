#pragma once
// envd access tokens (E2B's `envdAccessToken`, sent by the SDKs as
// `X-Access-Token`): one per sandbox, the same for its whole life (pause,
// resume and a vesseld restart included), so nothing has to be stored per
// sandbox. A token is HMAC-SHA256(key, "envd-access-token:" + sandbox id) in
// hex, under a 32-byte key kept in the state directory (0600). Deleting the
// key file revokes every token at the next start.
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
  // Many machines: the key every API replica and node shares, kept in the
  // store (meta `e2b_token_key`, hex), made by the first process to start.
  // A replica hands out tokens a node checks, and any replica checks
  // tokens another handed out.
  static Result<AccessTokens> fromStore(store::Store& store);
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

 private:
  std::string mac(std::string_view label, std::string_view sandbox_id) const;
  explicit AccessTokens(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

}  // namespace vessel::e2b
