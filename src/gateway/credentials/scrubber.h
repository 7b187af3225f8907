#pragma once
// Masks injected secrets in bytes flowing back to the guest (an upstream that
// echoes request headers must not hand the secret over). Matches are
// replaced with '*' of the same length so HTTP framing is unchanged. Only the
// longest tail that could start a secret is held back between chunks, so
// ordinary responses pass through without delay.
#include <string>
#include <string_view>
#include <vector>

namespace vessel::gateway::credentials {

class Scrubber {
 public:
  // Each string is masked as given; secretForms() makes the list. Values
  // under kMinSecretBytes are refused before they get here (policy, API).
  explicit Scrubber(std::vector<std::string> secrets);
  // Returns the bytes that can be sent now.
  std::string process(std::string_view in);
  // The held-back tail, at end of stream.
  std::string flush();

 private:
  std::vector<std::string> secrets_;
  std::string carry_;
};

// Credential values (and their token after "Bearer ") shorter than this are
// refused: short secrets cannot be told apart from ordinary text.
inline constexpr size_t kMinSecretBytes = 16;

// The forms a secret is scrubbed in: the header value and its token (the
// part after "Bearer " or "token "), each raw, in base64 and base64url at
// the three alignments a secret can have inside a longer encoded text, in
// percent-encoding (upper and lower case hex, minimal and every byte, '+'
// for space), and JSON-escaped.
std::vector<std::string> secretForms(std::string_view header_value);

}  // namespace vessel::gateway::credentials
