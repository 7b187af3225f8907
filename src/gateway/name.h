#pragma once
// Host names as the gateway uses them. A name arrives from the guest (SNI,
// Host, absolute-form URI, DNS question) and is normalized exactly once here;
// the resulting string is the only one used for matching, resolving, upstream
// SNI and certificate checks, so no two parts of the gateway can disagree on
// what name a flow is for.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::gateway {

inline constexpr size_t kMaxNameLength = 253;

// Lowercases ASCII, strips one trailing dot, and refuses anything that is not
// a plain DNS host name: empty labels, labels over 63 bytes, characters other
// than [a-z0-9-_], non-ASCII (IDNs must arrive as A-labels), and anything that
// reads as an IP literal (all-numeric or 0x-prefixed last label, ':' or '[').
Result<std::string> normalizeName(std::string_view raw);

// An authority "name[:port]" as in a Host header or absolute-form URI.
struct Authority {
  std::string name;  // normalized
  std::optional<uint16_t> port;
};
// Refuses userinfo ('@'), percent-encoding, whitespace, IP literals, bad ports.
Result<Authority> parseAuthority(std::string_view raw);

}  // namespace vessel::gateway
