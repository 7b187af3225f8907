#include "node/pool_sizer.h"

#include <algorithm>
#include <limits>

namespace vessel::node {

size_t PoolSizer::ceiling() const {
  if (!adaptive()) return std::numeric_limits<size_t>::max();
  return static_cast<size_t>(o_.budget_mib / std::max<uint64_t>(o_.vm_cost_mib, 1));
}

void PoolSizer::setFloor(size_t n) {
  o_.floor = n;
  learned_ = std::max(learned_, n);
}

size_t PoolSizer::decayed(Clock::time_point now) const {
  if (!seen_create_ || learned_ <= o_.floor || o_.idle <= Clock::duration::zero())
    return std::max(learned_, o_.floor);
  auto periods = (now - last_create_) / o_.idle;
  if (periods <= 0) return learned_;
  size_t above = learned_ - o_.floor;
  // More halvings than bits: nothing left above the floor.
  above = periods >= 64 ? 0 : above >> periods;
  return o_.floor + above;
}

void PoolSizer::onCreate(Clock::time_point now, bool hit) {
  learned_ = decayed(now);
  if (!hit && adaptive()) learned_ = std::min(learned_ + 1, std::max(ceiling(), o_.floor));
  last_create_ = now;
  seen_create_ = true;
}

size_t PoolSizer::target(Clock::time_point now) const {
  if (!adaptive()) return o_.floor;
  return std::min(decayed(now), ceiling());
}

}  // namespace vessel::node
