#pragma once
// Authenticated encryption of small secrets (AES-256-GCM, OpenSSL): what
// the store keeps of a credential's value, and each sandbox's credentials
// sealed for the one node that runs it (issue 24, item 5; docs/threat-
// model.md). A sealed text is "v1:" + base64(12-byte random nonce |
// ciphertext | 16-byte tag). `context` is bound in as associated data, so a
// sealed value copied to another row (another tenant, name or sandbox)
// does not open there.
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel {

inline constexpr size_t kAeadKeyBytes = 32;
// The largest plaintext seal() takes and open() gives back.
inline constexpr size_t kAeadMaxPlaintext = 1 << 20;

// `key` must be kAeadKeyBytes long and `plain` at most kAeadMaxPlaintext.
Result<std::string> aeadSeal(std::string_view key, std::string_view context,
                             std::string_view plain);
// kInvalidArgument for text that is not a sealed value; kPermissionDenied
// when it does not open under `key` and `context` (another key, another
// row, or changed bytes).
Result<std::string> aeadOpen(std::string_view key, std::string_view context,
                             std::string_view sealed);
bool aeadSealed(std::string_view text);

// A 32-byte key derived from `secret` for `label` (HMAC-SHA256): the key a
// node's credentials are sealed under, from that node's token.
std::string aeadDeriveKey(std::string_view secret, std::string_view label);

// Reads a 32-byte key file, creating it (0600, random) when missing; a file
// of another size is an error and is left alone.
Result<std::string> aeadKeyFile(const std::string& path);

}  // namespace vessel
