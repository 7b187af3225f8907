#pragma once
// The gateway's decision for one guest TCP flow, apart from how the proxy
// reads the first bytes, dials and relays: given the flow's name (SNI or
// Host; empty when it has none) and the guest's destination address, is it
// refused, dialled by the gateway's own resolution of the name, or dialled
// to the destination itself (an address rule, or full mode with nothing to
// name it by)? Inward ranges stay refused whatever a rule says.
#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/policy/address_class.h"
#include "gateway/policy/policy.h"

namespace vessel::gateway::policy {

enum class Route { kRefuse, kByName, kByAddress };

struct Decision {
  Route route = Route::kRefuse;
  // Why a flow is refused: "mode-none", "policy", "denied-address",
  // "inward-destination:<class>"; "" for an unnamed flow no rule covers
  // (the caller says why it found no name: "no-sni", "unparseable", ...).
  std::string reason;
};

// A name allowed by a name rule goes by name (the destination is ignored:
// the gateway resolves the name itself); otherwise an address rule (or full
// mode) covering the destination sends the flow there.
Decision decide(const Policy& p, const AddressClassifier& c, std::string_view name,
                const boost::asio::ip::address& destination, uint16_t port);

// For a by-name flow: "" if the gateway may dial `answer`, one of its own
// answers for the name; else why not ("inward-answer:<class>",
// "denied-answer"). port nullopt: a DNS answer (any port).
std::string refuseAnswer(const Policy& p, const AddressClassifier& c,
                         const boost::asio::ip::address& answer, std::optional<uint16_t> port);

// Whether an open flow, as it was dialled, is still allowed under `p` (a new
// policy): by name, its name and the address it reached; by address, the
// address. Inward-ness does not change with a policy and is not re-checked.
bool permits(const Policy& p, std::string_view name, const boost::asio::ip::address& address,
             uint16_t port, bool by_address);

}  // namespace vessel::gateway::policy
