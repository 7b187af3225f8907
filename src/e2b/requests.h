#pragma once
// The E2B REST API's requests at the edge (../shared/specs/e2b/openapi.yml,
// openapi-v2-notes.md, and what the `e2b` npm package really sends): each
// body or query parsed once, bounded, into a typed request for the lifecycle
// (ops::Lifecycle), or a kInvalidArgument error the API answers 400. What
// E2B has and Vessel cannot give (egress proxies,
// IAM tokens, a resume without memory, ...) is refused here with a
// message that says so, never silently dropped.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/rfc3339.h"
#include "e2b/volume_requests.h"
#include "ops/node.h"
#include "store/states.h"

namespace vessel::e2b {

// A header the gateway injects for requests to `host` (E2B's network rule
// `{host: [{transform: {headers: {name: value}}}]}`). `value` may hold
// `${e2b.secrets.NAME}` placeholders, resolved from the tenant's secrets.
struct HeaderRule {
  std::string host, header, value;
};

// E2B's egress settings mapped onto the gateway's: `allow_internet_access:
// false` and `denyOut: ["0.0.0.0/0"]` mean an allowlist of the `allowOut`
// names, addresses and CIDR ranges; otherwise everything is allowed, but the
// other `denyOut` ranges (allowed addresses excepted: E2B's allowed entries
// take precedence). Credentials for the header rules are added by the front
// end once it has made them.
struct Egress {
  ops::NetworkSpec spec;
  std::vector<HeaderRule> headers;
  std::optional<bool> internet;  // allow_internet_access as given (null: not given)
};

// Who may reach the sandbox's ports and what Host they see (E2B's
// network.allowPublicTraffic and network.maskRequestHost; docs/e2b.md):
// the lifecycle's type, stored with the sandbox at its create.
using Ingress = ops::IngressSpec;

struct NewSandbox {
  std::string template_id = "base";
  int64_t timeout_s = 15;  // the spec's default; the SDKs always send one
  std::map<std::string, std::string> metadata;
  std::vector<std::string> env;  // KEY=VALUE
  std::optional<Egress> egress;  // nullopt: the node's defaults
  // E2B's lifecycle: `autoPause` (onTimeout pause), `autoPauseMemory`
  // (false: a filesystem-only pause), `autoResume: {enabled}`.
  bool auto_pause = false;
  bool auto_pause_memory = true;
  bool auto_resume = false;
  Ingress ingress;
  // `volumeMounts`: the tenant's volumes by name, at their paths.
  std::vector<VolumeMount> volumes;
};
// POST /sandboxes (v1) and /v2/sandboxes (v2: no `secure`).
Result<NewSandbox> parseNewSandbox(std::string_view body, bool v2);

// POST /sandboxes/{id}/connect (timeout required) and /v2/.../connect
// (optional body; timeout defaults to 300 s). `memory: false` is refused.
Result<int64_t> parseConnect(std::string_view body, bool v2);
// POST /sandboxes/{id}/resume: {timeout?: default 15, autoPause?: false}.
Result<int64_t> parseResume(std::string_view body);
// POST /sandboxes/{id}/timeout: {timeout} seconds from now.
Result<int64_t> parseTimeout(std::string_view body);
// POST /sandboxes/{id}/refreshes: {duration?: 0..3600}; unset: 15 s.
Result<int64_t> parseRefresh(std::string_view body);
// POST /sandboxes/{id}/pause: {memory?: true}; whether to keep memory
// (false: only the filesystem, a resume boots it again).
Result<bool> parsePause(std::string_view body);

struct ForkRequest {
  int count = 1;
  std::optional<int64_t> timeout_s;
};
Result<ForkRequest> parseFork(std::string_view body);
// POST /sandboxes/{id}/snapshots: {name?}; "" when not given.
Result<std::string> parseSnapshot(std::string_view body);
// PUT /sandboxes/{id}/network (SandboxNetworkUpdateConfig).
Result<Egress> parseNetworkUpdate(std::string_view body);

// POST /secrets and POST /secrets/{id}: a name (on create) and a value.
struct SecretRequest {
  std::string name, value;
};
Result<SecretRequest> parseSecret(std::string_view body, bool create);
// Whether `n` can name a secret (E2B: [a-zA-Z0-9_-], 1..63 here, since a
// secret is stored as a Vessel credential of that name).
bool secretName(std::string_view n);
// `value` with every `${e2b.secrets.NAME}` replaced by lookup(NAME); an
// unknown name is kNotFound, a malformed placeholder kInvalidArgument.
template <typename Lookup>
Result<std::string> expandSecrets(std::string_view value, Lookup&& lookup);

// GET /sandboxes (v1) and /v2/sandboxes.
struct ListQuery {
  std::map<std::string, std::string> metadata;
  std::set<store::SandboxState> states;  // running (with its transient states) and/or paused
  std::optional<int64_t> started_after_ms;
  std::string template_id;
  bool newest_first = true;
  int limit = 100;
  std::string next_token;  // a sandbox id
};
// `target` is the request target with its query string. v1 knows only
// `metadata` and lists running sandboxes.
Result<ListQuery> parseListQuery(std::string_view target, bool v2);

// GET /sandboxes/{id}/metrics?start=S&end=E (Unix seconds, both optional).
Result<std::pair<std::optional<int64_t>, std::optional<int64_t>>> parseMetricsRange(
    std::string_view target);

using vessel::parseRfc3339;  // base/rfc3339.h

template <typename Lookup>
Result<std::string> expandSecrets(std::string_view value, Lookup&& lookup) {
  constexpr std::string_view kOpen = "${e2b.secrets.";
  std::string out;
  for (int n = 0; n < 16; ++n) {
    auto at = value.find(kOpen);
    if (at == std::string_view::npos) return out.append(value);
    out.append(value.substr(0, at));
    auto end = value.find('}', at);
    if (end == std::string_view::npos)
      return Error(Code::kInvalidArgument, "an unterminated ${e2b.secrets.…} placeholder");
    std::string name(value.substr(at + kOpen.size(), end - at - kOpen.size()));
    if (!secretName(name))
      return Error(Code::kInvalidArgument, "a placeholder names no valid secret");
    VESSEL_ASSIGN_OR_RETURN(std::string v, lookup(name));
    out += v;
    value = value.substr(end + 1);
  }
  return Error(Code::kInvalidArgument, "more than 16 secret placeholders in one header");
}

}  // namespace vessel::e2b
