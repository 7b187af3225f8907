#pragma once
// The nftables rulesets of the egress path, as text: pure functions of the
// layout and a slot's addresses, so every rule that keeps a guest in its
// lane is checked as text (rulesets_test.cc) without a namespace, and the
// same text is what Slot and SlotPool load with one atomic `nft -f -`.
// docs/gateway.md ("Slot rules") explains each rule.
#include <string>

#include "node/network/addresses.h"

namespace vessel::node::network {

// The slot namespace's ruleset: the guest may send only IPv4 from its
// assigned MAC and address, TCP goes to the gateway's proxy, DNS to its
// resolver, everything else is dropped.
std::string sandboxRuleset(const NetworkLayout& l, const SlotAddresses& a);
// The gateway namespace's ruleset for all slots of a layout. It replaces
// the table if one is left from an earlier run (whose slots are then
// re-added one by one as they are adopted).
std::string gatewayRuleset(const NetworkLayout& l);
std::string gatewayTableName(const NetworkLayout& l);
// The slot's element of the gateway table's `slot_sources` set: the only
// (interface, source) pair the gateway accepts from its veth.
std::string slotSourcesElement(const SlotAddresses& a);

}  // namespace vessel::node::network
