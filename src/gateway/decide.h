#pragma once
// Decide: what the gateway does with one guest connection, from what the
// first bytes were (classify.h), the sandbox's policy and where the guest
// sent it (address and port; an address rule lets a flow go there without a
// name, policy/decision.h). Pure, so every row of the decision is tested as a table
// (decide_test.cc) and fuzzed with the classifier (tests/fuzz/first_bytes).
// proxy.cc carries the verdict out: dial, re-check, relay.
#include <cstdint>
#include <optional>
#include <string>

#include "gateway/classify.h"
#include "gateway/policy/address_class.h"
#include "gateway/policy/policy.h"

namespace vessel::gateway {

struct Verdict {
  enum class Action {
    kDeny,
    // Resolve `name` with the gateway's own resolver and dial its answer on
    // the guest's port.
    kDialName,
    // To the guest's destination (an address rule covers it, or full mode
    // with nothing to name the flow by): opaque bytes, no Host pin, no
    // credential. Inward destinations are refused here already.
    kDialOriginal,
  };
  // How the bytes are relayed once dialled.
  enum class Tier {
    kSplice,     // copied both ways (TLS without credential or inspection; opaque)
    kHttp,       // plaintext: every request's Host checked against `name`
    kTerminate,  // TLS terminated with the deployment CA (credential or inspect)
  };
  Action action = Action::kDeny;
  std::string reason;  // kDeny: the deny counter's suffix ("tcp_deny_<reason>")
  // The normalized name the connection is pinned to (also set on a deny
  // when one was read, for the log). Empty for kDialOriginal.
  std::string name;
  Tier tier = Tier::kSplice;
  std::optional<policy::Credential> credential;  // only with kTerminate, on 443
};

Verdict decide(const Classified& c, const policy::Policy& p,
               const policy::AddressClassifier& classes,
               const boost::asio::ip::address& destination, uint16_t port);

}  // namespace vessel::gateway
