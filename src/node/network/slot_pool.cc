#include "node/network/slot_pool.h"

#include <boost/asio/post.hpp>
#include <filesystem>

#include "base/log.h"
#include "base/offload.h"
#include "node/network/rulesets.h"

namespace vessel::node::network {

Result<std::unique_ptr<SlotPool>> SlotPool::create(NetworkLayout layout, size_t ready_target) {
  std::unique_ptr<SlotPool> p(new SlotPool());
  p->layout_ = std::move(layout);
  p->target_ = ready_target;
  const NetworkLayout& l = p->layout_;
  VESSEL_TRY_CTX(os::nftApply(l.gateway_netns, gatewayRuleset(l)), "gateway slot table");
  p->gateway_table_ = os::NftTable(l.gateway_netns, "ip", gatewayTableName(l));
  // Set aside before the refill, which must not pick their indices.
  p->leftovers_ = existingSlots(l.prefix);
  p->in_use_ = p->leftovers_;
  VESSEL_TRY(p->refill());
  return p;
}

SlotPool::~SlotPool() {
  *alive_ = false;
  makers_->join();  // a slot in the making finishes; its acquirer finds no pool
  if (filler_.joinable()) filler_.join();
  ready_.clear();  // slots first: they remove their elements from the table
  // Handed-over slots keep their element, so the table's filter still
  // applies to them until the next vesseld replaces it.
  if (handed_over_ > 0) gateway_table_.release();
}

std::set<uint32_t> existingSlots(const std::string& prefix) {
  std::set<uint32_t> out;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    if (auto i = slotIndexOf(prefix, e.path().filename().string())) out.insert(*i);
  }
  return out;
}

void removeLeftovers(const std::string& prefix) {
  std::vector<std::string> names;
  for (uint32_t i : existingSlots(prefix)) names.push_back(prefix + "-" + std::to_string(i));
  names.push_back(prefix + "-gw");
  for (const auto& n : names) {
    auto ns = os::Netns::adopt(n);
    if (!ns.ok()) continue;
    Logger("network").warn("removing network namespace {} left by an earlier run", n);
    ns->destroy();
  }
}

Result<std::unique_ptr<Slot>> SlotPool::adopt(uint32_t index) {
  if (!leftovers_.erase(index))
    return Error(Code::kNotFound, "network slot " + std::to_string(index) +
                                      " was not left by an earlier run (its namespace is gone)");
  auto s = Slot::adopt(layout_, index);
  if (!s.ok()) in_use_.erase(index);
  return s;
}

void SlotPool::dropLeftovers() {
  for (uint32_t i : leftovers_) {
    auto ns = os::Netns::adopt(slotNetnsName(layout_, i));
    if (ns.ok()) {
      // Its veth pair goes with it (a link that outlives it for a while,
      // held by a dying VM's tap, is replaced by Slot::create).
      Logger("network").info("removing network slot {} left by an earlier run", i);
      ns->destroy();
    }
    in_use_.erase(i);
  }
  leftovers_.clear();
}

void SlotPool::handOver(std::unique_ptr<Slot> slot) {
  if (!slot) return;
  slot->handOver();
  ++handed_over_;
  in_use_.erase(slot->index());
}

void SlotPool::refillInBackground(boost::asio::io_context& io) {
  if (filling_ || ready_.size() >= target_) return;
  auto i = nextIndex();
  if (!i.ok()) {
    Logger("network").warn("slot pool refill: {}", i.error().message());
    return;
  }
  filling_ = true;
  if (filler_.joinable()) filler_.join();  // the previous one has posted its result
  uint32_t index = *i;
  filler_ = std::thread([this, &io, index, layout = layout_, alive = alive_] {
    auto s = Slot::create(layout, index);
    // The result goes back to the io thread, which owns the pool. If the
    // pool is gone by then, the slot is destroyed with the handler.
    auto done = std::make_shared<Result<std::unique_ptr<Slot>>>(std::move(s));
    boost::asio::post(io, [this, index, done, alive] {
      if (!*alive) return;
      filling_ = false;
      if (done->ok()) {
        ready_.push_back(std::move(**done));
      } else {
        in_use_.erase(index);
        Logger("network").warn("slot pool refill: {}", done->error().message());
      }
    });
  });
}

Result<uint32_t> SlotPool::nextIndex() {
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    if (in_use_.insert(i).second) return i;
  }
  return Error(Code::kResourceExhausted, "no free network slot");
}

Status SlotPool::refill() {
  while (ready_.size() < target_) {
    VESSEL_ASSIGN_OR_RETURN(uint32_t i, nextIndex());
    auto s = Slot::create(layout_, i);
    if (!s.ok()) {
      in_use_.erase(i);
      return std::move(s).error();
    }
    ready_.push_back(std::move(*s));
  }
  return okStatus();
}

Result<std::unique_ptr<Slot>> SlotPool::acquire(const GuestLink& link) {
  if (link.kind == GuestLink::Kind::kTap && !ready_.empty()) {
    auto s = std::move(ready_.back());
    ready_.pop_back();
    return s;
  }
  VESSEL_ASSIGN_OR_RETURN(uint32_t i, nextIndex());
  auto s = Slot::create(layout_, i, link);
  if (!s.ok()) in_use_.erase(i);
  return s;
}

boost::asio::awaitable<Result<std::unique_ptr<Slot>>> SlotPool::acquireAsync() {
  if (!ready_.empty()) co_return acquire();
  auto i = nextIndex();
  if (!i.ok()) co_return std::move(i).error();
  uint32_t index = *i;
  auto alive = alive_;
  // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
  auto make = [layout = layout_, index] { return Slot::create(layout, index); };
  auto s = co_await offload(*makers_, std::move(make));
  // The pool may be gone by now (vesseld stopping): the slot goes with it.
  if (!*alive) co_return Error(Code::kUnavailable, "network slot pool stopped");
  if (!s.ok()) in_use_.erase(index);
  co_return s;
}

void SlotPool::release(std::unique_ptr<Slot> slot) {
  if (!slot) return;
  uint32_t i = slot->index();
  slot.reset();
  in_use_.erase(i);
}

boost::asio::awaitable<void> SlotPool::releaseAsync(std::unique_ptr<Slot> slot) {
  if (!slot) co_return;
  uint32_t index = slot->index();
  auto alive = alive_;
  // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
  auto teardown = [s = std::move(slot)]() mutable {
    s.reset();
    return true;
  };
  (void)co_await offload(*makers_, std::move(teardown));
  if (*alive) in_use_.erase(index);
}

}  // namespace vessel::node::network
