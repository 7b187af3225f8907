#include "gateway/decide.h"

#include <utility>

#include "gateway/name.h"

namespace vessel::gateway {

namespace {

using Action = Verdict::Action;
using Tier = Verdict::Tier;
using Kind = Classified::Kind;

Verdict deny(std::string reason, std::string name = {}) {
  Verdict v;
  v.reason = std::move(reason);
  v.name = std::move(name);
  return v;
}

Verdict dialOriginal(Tier tier) {
  Verdict v;
  v.action = Action::kDialOriginal;
  v.tier = tier;
  return v;
}

// Why a connection whose first bytes named nothing is refused.
std::string unnamedReason(const Classified& c) {
  if (c.timed_out) return "classify-timeout";
  if (c.kind == Kind::kTls) return "bad-client-hello";
  if (c.kind == Kind::kHttp) return "bad-request";
  return "unparseable";
}

}  // namespace

Verdict decide(const Classified& c, const policy::Policy& p, uint16_t port) {
  const bool full = p.mode == policy::Mode::kFull;
  if (p.mode == policy::Mode::kNone) return deny("mode-none");
  Verdict v;
  if (c.kind == Kind::kTls && c.complete) {
    const auto& names = c.hello.server_names;
    if (names.size() != 1) {
      // Full mode dials where the guest sent a hello without SNI; two SNIs
      // are refused in every mode (which would the upstream use?).
      if (!full || !names.empty()) return deny(names.empty() ? "no-sni" : "multiple-sni");
      return dialOriginal(Tier::kSplice);
    }
    if (c.hello.has_ech && !full) return deny("ech");
    auto n = normalizeName(names[0]);
    if (!n.ok()) return deny("bad-sni");
    v.name = std::move(*n);
    // Credentials are injected on 443; inspection applies on every port
    // its rule names.
    if (port == 443)
      if (const auto* cred = p.credentialFor(v.name)) v.credential = *cred;
    v.tier = v.credential || p.inspects(v.name, port) ? Tier::kTerminate : Tier::kSplice;
  } else if (c.kind == Kind::kHttp && c.complete) {
    v.name = c.head.authority.name;
    if (c.head.authority.port && *c.head.authority.port != port)
      return deny("host-port-mismatch", std::move(v.name));
    v.tier = Tier::kHttp;
  } else if (full) {
    // Whatever cannot be named goes where the guest sent it. What began
    // like HTTP is still relayed as HTTP, whose parser then refuses it.
    return dialOriginal(c.kind == Kind::kHttp ? Tier::kHttp : Tier::kSplice);
  } else {
    return deny(unnamedReason(c));
  }
  if (!p.allows(v.name, port)) return deny("policy", std::move(v.name));
  v.action = Action::kDialName;
  return v;
}

}  // namespace vessel::gateway
