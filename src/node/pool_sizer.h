#pragma once
// How many VMs one template's warm pool should hold, from the creates it
// has seen (issue 16). Pure: the time comes in as an argument, so the policy
// is tested without sleeping.
//
//  - It grows by one for every create that found the pool empty (a miss):
//    a burst of N grows it to N; a steady stream faster than the pool
//    refills keeps missing and grows it until it keeps up or hits the
//    ceiling.
//  - Idle (no create) for `idle`, the part above the floor halves, and
//    again every further `idle`.
//  - Never above the ceiling: the memory budget over what one pooled VM
//    costs (its measured PSS; the guest's nominal RAM until measured), and
//    never below the floor (the operator's --warm-pool N) unless the
//    budget is smaller.
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace vessel::node {

class PoolSizer {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    size_t floor = 0;
    uint64_t budget_mib = 0;  // 0: no demand sizing; the pool holds `floor`
    Clock::duration idle = std::chrono::seconds(60);
    // What one pooled VM is assumed to cost until setVmCost() measured it.
    uint64_t vm_cost_mib = 256;
  };
  PoolSizer() : PoolSizer(Options()) {}
  explicit PoolSizer(Options o) : o_(o), learned_(o.floor) {}

  // A create asked the pool for a VM at `now`; `hit`: it had one.
  void onCreate(Clock::time_point now, bool hit);
  // What one pooled VM holds (PSS), measured.
  void setVmCost(uint64_t mib) { o_.vm_cost_mib = mib > 0 ? mib : 1; }
  void setFloor(size_t n);
  void setBudget(uint64_t mib) { o_.budget_mib = mib; }

  // VMs the pool should hold at `now`.
  size_t target(Clock::time_point now) const;
  // The most the budget allows (SIZE_MAX without demand sizing).
  size_t ceiling() const;
  bool adaptive() const { return o_.budget_mib > 0; }
  uint64_t vmCostMib() const { return o_.vm_cost_mib; }
  Clock::duration idle() const { return o_.idle; }

 private:
  // The learned size decayed for the idle time up to `now`.
  size_t decayed(Clock::time_point now) const;
  Options o_;
  size_t learned_;
  Clock::time_point last_create_{};
  bool seen_create_ = false;
};

}  // namespace vessel::node
