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
  // Each secret is masked raw; short ones (< 6 bytes) are refused by policy.
  explicit Scrubber(std::vector<std::string> secrets);
  // Returns the bytes that can be sent now.
  std::string process(std::string_view in);
  // The held-back tail, at end of stream.
  std::string flush();

 private:
  std::vector<std::string> secrets_;
  std::string carry_;
};

// The forms a secret is scrubbed in: the header value, its token (the part
// after "Bearer " or "token "), and their base64 and percent-encodings.
std::vector<std::string> secretForms(std::string_view header_value);

}  // namespace vessel::gateway::credentials
