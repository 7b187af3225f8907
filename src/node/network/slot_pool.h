#pragma once
// The node's pool of network slots (slot.h): ready ones made ahead of
// sandbox creates, the gateway namespace's table they all register with,
// the slot indices in use, and the slots an earlier vesseld left behind for
// this one to take over or remove.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "node/network/addresses.h"
#include "node/network/slot.h"
#include "os/netns.h"

namespace vessel::node::network {

// Slot indices whose namespaces "<prefix>-<i>" exist (left by an earlier run).
std::set<uint32_t> existingSlots(const std::string& prefix);
// For a vesseld without egress: removes every slot namespace of `prefix`
// and the private gateway namespace an earlier run with egress left.
void removeLeftovers(const std::string& prefix);

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
