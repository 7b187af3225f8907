#pragma once
// Network slots: one network namespace per sandbox holding its tap, wired to
// the gateway's namespace by a veth whose gateway-side address identifies
// the slot. Inside the slot, nftables lets the guest send only IPv4 from its
// assigned MAC and address, hands every TCP connection to the gateway's
// proxy and DNS to the gateway's resolver, and drops everything else. The
// slot's transit address (SNAT) is what the gateway maps to a sandbox: the
// guest cannot choose it. Every guest sees the same MAC and addresses, so a
// restored snapshot needs no reconfiguration.
//
// This file: one slot, RAII over its namespace, veth pair, tap and nftables
// rules. The names and addresses are addresses.h, the rule text rulesets.h,
// the pool of ready slots slot_pool.h.
#include <cstdint>
#include <memory>

#include "base/fd.h"
#include "base/result.h"
#include "node/network/addresses.h"
#include "os/netns.h"

namespace vessel::node::network {

class Slot {
 public:
  ~Slot();
  // Creates slot `index`; on any failure nothing of it remains (fail closed:
  // no slot, no network).
  static Result<std::unique_ptr<Slot>> create(const NetworkLayout& layout, uint32_t index,
                                              const GuestLink& link = {});
  // Takes over tap slot `index` that an earlier vesseld made and handed
  // over (handOver()) while its VM, which holds the tap, runs on: checks
  // that the namespace, tap, transit link and rules are all there and puts
  // the slot back in the gateway table. On failure what is left of it is
  // removed (fail closed).
  static Result<std::unique_ptr<Slot>> adopt(const NetworkLayout& layout, uint32_t index);
  // Lets go of everything without removing it, for the next vesseld.
  void handOver();

  uint32_t index() const { return index_; }
  const os::Netns& netns() const { return netns_; }
  const SlotAddresses& addresses() const { return addr_; }
  // The address the gateway sees this slot's flows come from.
  const std::string& sourceAddress() const { return addr_.slot_address; }
  // The tap for the VMM (kTap only; -1 otherwise).
  int tapFd() const { return tap_.get(); }

 private:
  Slot() = default;
  // Puts this slot's source in the gateway table's slot_sources set.
  Status addGatewayElement();
  uint32_t index_ = 0;
  NetworkLayout layout_;
  SlotAddresses addr_;
  os::Netns netns_;
  Fd tap_;
  os::Link gateway_side_;  // deleting it deletes the whole veth pair
  bool element_added_ = false;
};

}  // namespace vessel::node::network
