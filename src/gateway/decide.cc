#include "gateway/decide.h"

#include <utility>

#include "gateway/name.h"
#include "gateway/policy/decision.h"

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

// To where the guest sent it, if an address rule (or full mode) covers the
// destination and it is not inward: spliced, since the address, not a name,
// is what was allowed.
Verdict toDestination(const policy::Policy& p, const policy::AddressClassifier& classes,
                      const boost::asio::ip::address& destination, uint16_t port,
                      std::string unnamed_reason) {
  policy::Decision d = policy::decide(p, classes, "", destination, port);
  if (d.route == policy::Route::kRefuse)
    return deny(d.reason.empty() ? std::move(unnamed_reason) : d.reason);
  Verdict v;
  v.action = Action::kDialOriginal;
  v.tier = Tier::kSplice;
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

Verdict decide(const Classified& c, const policy::Policy& p,
               const policy::AddressClassifier& classes,
               const boost::asio::ip::address& destination, uint16_t port) {
  const bool full = p.mode == policy::Mode::kFull;
  if (p.mode == policy::Mode::kNone) return deny("mode-none");
  // An address rule covering the destination (or full mode) lets a flow go
  // there without a name.
  const bool unnamed_ok = full || p.allowsAddress(destination, port);
  Verdict v;
  if (c.kind == Kind::kTls && c.complete) {
    const auto& names = c.hello.server_names;
    if (names.size() != 1) {
      // Where an unnamed flow may go, a hello without SNI goes where the
      // guest sent it; two SNIs are refused in every mode (which would the
      // upstream use?).
      std::string why = names.empty() ? "no-sni" : "multiple-sni";
      if (!unnamed_ok || !names.empty()) return deny(std::move(why));
      return toDestination(p, classes, destination, port, std::move(why));
    }
    if (c.hello.has_ech && !full) {
      // The name is hidden: only an address rule covering the destination
      // lets it through.
      if (!unnamed_ok) return deny("ech");
      return toDestination(p, classes, destination, port, "ech");
    }
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
  } else if (unnamed_ok) {
    // Whatever cannot be named goes where the guest sent it, as opaque bytes.
    return toDestination(p, classes, destination, port, unnamedReason(c));
  } else {
    return deny(unnamedReason(c));
  }
  // A name rule sends the flow by the gateway's own resolution; a name no
  // rule allows, sent to an address a rule does, goes there as opaque bytes
  // (the name decides nothing: no credential, no inspection).
  policy::Decision d = policy::decide(p, classes, v.name, destination, port);
  if (d.route == policy::Route::kRefuse)
    return deny(d.reason.empty() ? "policy" : d.reason, std::move(v.name));
  if (d.route == policy::Route::kByAddress) {
    Verdict o;
    o.action = Action::kDialOriginal;
    o.tier = Tier::kSplice;
    return o;
  }
  v.action = Action::kDialName;
  return v;
}

}  // namespace vessel::gateway
