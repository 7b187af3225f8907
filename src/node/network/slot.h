#pragma once
// Network slots: one network namespace per sandbox holding its tap, wired to
// the gateway's namespace by a veth whose gateway-side address identifies
// the slot. Inside the slot, nftables lets the guest send only IPv4 from its
// assigned MAC and address, hands every TCP connection to the gateway's
// proxy and DNS to the gateway's resolver, and drops everything else. The
// slot's transit address (SNAT) is what the gateway maps to a sandbox: the
// guest cannot choose it. Every guest sees the same MAC and addresses, so a
// restored snapshot needs no reconfiguration.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "os/netns.h"

namespace vessel::node::network {

struct NetworkLayout {
  std::string gateway_netns;  // where vessel-gateway listens; "" = this namespace
  std::string prefix = "vs";  // netns "<prefix>-<i>", gateway-side veth "<prefix>h<i>"
  std::string transit_base = "10.200.0.0";  // a /16, one /30 per slot
  uint16_t proxy_port = 15001;
  uint16_t dns_port = 15053;
  // What the guest sees, identical in every slot.
  std::string guest_ip = "172.16.0.2";
  std::string gateway_ip = "172.16.0.1";  // the guest's default route and resolver
  std::string guest_mac = "06:00:ac:10:00:02";
  std::string gateway_mac = "06:00:ac:10:00:01";
  // Per-slot kernel limits (docs/gateway.md, "Fair share"): open TCP
  // connections, new TCP connections and DNS packets per second (bursts of
  // twice the rate).
  uint32_t max_tcp_connections = 4096;
  uint32_t new_tcp_per_second = 400;
  uint32_t dns_per_second = 400;
};

// The guest's side of the slot: a tap for a VM, or (tests without a VM) a
// veth whose peer is placed in another namespace that plays the guest.
struct GuestLink {
  enum class Kind { kTap, kVeth } kind = Kind::kTap;
  std::string veth_peer_netns;          // kVeth: the "guest" namespace
  std::string veth_peer_name = "eth0";  // kVeth: the guest's interface name
};

struct SlotAddresses {
  std::string guest_if;  // "tap0" or "guest0"
  std::string transit_if = "transit0";
  std::string gateway_side_if;  // in the gateway namespace
  std::string slot_address;     // transit, slot side: the flows' source
  std::string gateway_address;  // transit, gateway side
};

// The slot namespace's ruleset (exposed for tests and docs).
std::string sandboxRuleset(const NetworkLayout& l, const SlotAddresses& a);
// The gateway namespace's ruleset for all slots of a layout. It replaces
// the table if one is left from an earlier run (whose slots are then
// re-added one by one as they are adopted).
std::string gatewayRuleset(const NetworkLayout& l);
std::string gatewayTableName(const NetworkLayout& l);
// Slot indices whose namespaces "<prefix>-<i>" exist (left by an earlier run).
std::set<uint32_t> existingSlots(const std::string& prefix);
// For a vesseld without egress: removes every slot namespace of `prefix`
// and the private gateway namespace an earlier run with egress left.
void removeLeftovers(const std::string& prefix);

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

// Pre-made slots so sandbox create does not pay for namespace and rule setup.
// Released slots are destroyed, not reused: a new sandbox never inherits
// conntrack state or neighbour entries from an old one.
class SlotPool {
 public:
  // The first ready_target slots are made before this returns. Slot
  // namespaces of this layout left by an earlier run are set aside as
  // leftovers: adopt() takes them over, dropLeftovers() removes the rest.
  static Result<std::unique_ptr<SlotPool>> create(NetworkLayout layout, size_t ready_target);
  // Unless slots were handed over, the gateway table goes too. Waits for a
  // background refill in flight.
  ~SlotPool();

  Result<std::unique_ptr<Slot>> acquire(const GuestLink& link = {});
  // A ready tap slot, or (when none is ready, e.g. in a burst of creates)
  // one made on the pool's own thread, so the io thread that serves the
  // API keeps answering meanwhile.
  boost::asio::awaitable<Result<std::unique_ptr<Slot>>> acquireAsync();
  // Destroys the slot here (tests, a start that failed)...
  void release(std::unique_ptr<Slot> slot);
  // ... or, for an io thread that serves the API, on one of the makers'
  // threads (some five `nft`/`ip` runs). Its index is not reused before
  // the slot is gone; it counts as attached until then.
  boost::asio::awaitable<void> releaseAsync(std::unique_ptr<Slot> slot);
  // A leftover slot whose VM a restarted vesseld takes over.
  Result<std::unique_ptr<Slot>> adopt(uint32_t index);
  // Removes the leftovers nobody adopted (their VMs are gone).
  void dropLeftovers();
  // Keeps a slot (and the gateway table) for the next vesseld: this one
  // stops, the VM runs on.
  void handOver(std::unique_ptr<Slot> slot);
  size_t leftovers() const { return leftovers_.size(); }
  size_t handedOver() const { return handed_over_; }
  // Creates tap slots until ready_target are waiting.
  Status refill();
  // The same, one slot at a time on a thread of its own (a slot is some
  // fifteen `ip`/`nft` runs: the io thread must not wait for them); the
  // slot joins the ready ones on `io`'s thread. No-op while one is made.
  void refillInBackground(boost::asio::io_context& io);
  size_t ready() const { return ready_.size(); }
  // Slots that exist or are being made: ready, handed out, in the making.
  size_t total() const { return in_use_.size(); }
  // Slots handed out (to VMs).
  size_t attached() const { return in_use_.size() - ready_.size() - (filling_ ? 1 : 0); }
  size_t target() const { return target_; }
  const NetworkLayout& layout() const { return layout_; }

 private:
  SlotPool() = default;
  Result<uint32_t> nextIndex();
  NetworkLayout layout_;
  size_t target_ = 0;
  os::NftTable gateway_table_;
  std::vector<std::unique_ptr<Slot>> ready_;
  std::set<uint32_t> in_use_;
  std::set<uint32_t> leftovers_;  // also in in_use_
  size_t handed_over_ = 0;
  bool filling_ = false;
  std::thread filler_;
  // Where acquireAsync() makes slots; stopped and joined first thing in
  // the destructor. Several: a create's slot must not queue behind the one
  // a warm-pool refill is making (slots of different indexes are
  // independent; refillInBackground already makes one beside them).
  std::unique_ptr<boost::asio::thread_pool> makers_ = std::make_unique<boost::asio::thread_pool>(4);
  // Cleared by the destructor: a refill that ends later finds no pool.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace vessel::node::network
