// The credential scrubber, as a property: for any secrets and any response
// bytes cut into any chunks, the bytes the guest receives
//   - have the length of the upstream's (HTTP framing is unchanged),
//   - differ from them only by '*',
//   - never hold a secret, and mask part of every secret occurrence,
//   - mask nothing outside an occurrence of some secret,
// and with one secret the chunking does not change the result. Also: the
// base64 of any text that holds a secret holds one of secretForms().
//
// Input: a header byte (secret count 1-3, chunking seed), then one secret
// per line, then the stream. '*' is taken out of the secrets: masking one
// secret writes '*', which could complete another that holds '*' (an
// artefact of the mask character, not a leak of upstream bytes).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/base64.h"
#include "gateway/credentials/scrubber.h"

using vessel::gateway::credentials::Scrubber;
using vessel::gateway::credentials::secretForms;

namespace {

std::string scrub(const std::vector<std::string>& secrets, std::string_view in, unsigned seed) {
  Scrubber s(secrets);
  std::string out;
  size_t pos = 0, step = seed % 17 + 1;
  while (pos < in.size()) {
    size_t n = seed == 0 ? in.size() : std::min(in.size() - pos, step);
    out += s.process(in.substr(pos, n));
    pos += n;
    step = (step * 5 + seed) % 23 + 1;
  }
  out += s.flush();
  return out;
}

// Every secret occurrence in `in` as [begin, end).
std::vector<std::pair<size_t, size_t>> occurrences(const std::vector<std::string>& secrets,
                                                   std::string_view in) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& s : secrets)
    for (size_t at = in.find(s); at != std::string_view::npos; at = in.find(s, at + 1))
      out.emplace_back(at, at + s.size());
  return out;
}

void checkScrubbed(const std::vector<std::string>& secrets, std::string_view in,
                   const std::string& out) {
  if (out.size() != in.size()) __builtin_trap();
  auto occ = occurrences(secrets, in);
  std::vector<bool> covered(in.size(), false);
  for (auto [b, e] : occ) {
    bool masked = false;
    for (size_t i = b; i < e; ++i) {
      covered[i] = true;
      masked = masked || out[i] != in[i];
    }
    if (!masked) __builtin_trap();  // an occurrence went out whole
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (out[i] == in[i]) continue;
    if (out[i] != '*' || !covered[i]) __builtin_trap();  // over-masking or a changed byte
  }
  for (const auto& s : secrets)
    if (out.find(s) != std::string::npos) __builtin_trap();
}

// base64(prefix + token + suffix) must hold one of the token's forms, at
// each of the three alignments.
void checkBase64Forms(std::string_view secret, std::string_view stream) {
  if (secret.size() < vessel::gateway::credentials::kMinSecretBytes) return;
  auto forms = secretForms(secret);
  std::string_view token = secret;
  if (auto sp = secret.rfind(' '); sp != std::string_view::npos && sp + 1 < secret.size())
    token = secret.substr(sp + 1);
  if (token.size() < vessel::gateway::credentials::kMinSecretBytes) return;
  for (size_t align = 0; align < 3; ++align) {
    std::string text(stream.substr(0, std::min(stream.size(), align)));
    text.append(align - text.size(), 'x');
    text.append(token);
    text.append(stream.substr(std::min(stream.size(), align), 2));
    std::string enc = vessel::base64Encode(text);
    bool found = false;
    for (const auto& f : forms) found = found || enc.find(f) != std::string::npos;
    if (!found) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t count = data[0] % 3 + 1;
  unsigned seed = data[0] / 3;
  std::vector<std::string> secrets;
  while (secrets.size() < count) {
    size_t nl = in.find('\n');
    if (nl == std::string_view::npos) return 0;
    std::string s(in.substr(0, std::min<size_t>(nl, 64)));
    s.erase(std::remove(s.begin(), s.end(), '*'), s.end());
    if (!s.empty()) secrets.push_back(std::move(s));
    in.remove_prefix(nl + 1);
  }
  if (secrets.empty()) return 0;
  std::string whole = scrub(secrets, in, 0);
  checkScrubbed(secrets, in, whole);
  std::string chunked = scrub(secrets, in, seed | 1);
  checkScrubbed(secrets, in, chunked);
  if (secrets.size() == 1 && chunked != whole) __builtin_trap();
  checkBase64Forms(secrets[0], in);
  return 0;
}
