#include "node/warm_pool.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/log.h"

namespace vessel::node {

std::optional<PreparedVm> WarmPool::take(const std::string& template_id) {
  auto it = pools_.find(template_id);
  if (it == pools_.end() || it->second.empty()) return std::nullopt;
  PreparedVm p = std::move(it->second.front());
  it->second.pop_front();
  store_.release(template_id);  // the pool's hold; the sandbox takes its own
  return p;
}

size_t WarmPool::pooled(const std::string& template_id) const {
  auto it = pools_.find(template_id);
  return it == pools_.end() ? 0 : it->second.size();
}

std::vector<pid_t> WarmPool::pooledPids(const std::string& template_id) const {
  std::vector<pid_t> out;
  if (auto it = pools_.find(template_id); it != pools_.end())
    for (const auto& p : it->second) out.push_back(p.vm->pid());
  return out;
}

size_t WarmPool::size(const std::string& template_name) const {
  auto it = sizes_.find(template_name);
  return it == sizes_.end() ? default_size_ : it->second;
}

void WarmPool::createFinished() {
  if (--creating_ == 0) {
    auto wanted = std::move(refill_wanted_);
    refill_wanted_.clear();
    for (const auto& name : wanted) refillLater(name);
  }
}

void WarmPool::refillLater(const std::string& template_name) {
  if (draining_ || size(template_name) == 0 || filling_[template_name]) return;
  // Not while creates run: on a loaded node a new VM's restore would take
  // CPU from the restores callers are waiting for (a burst then finishes
  // later than it would without a pool).
  if (creating_ > 0) {
    refill_wanted_.insert(template_name);
    return;
  }
  filling_[template_name] = true;
  asio::co_spawn(
      io_,
      [this, template_name]() -> asio::awaitable<void> {
        auto s = co_await fill(template_name);
        filling_[template_name] = false;
        if (!s.ok())
          Logger("runtime").warn("pool refill for {}: {}", template_name, s.error().message());
      },
      asio::detached);
}

asio::awaitable<Status> WarmPool::fill(const std::string& template_name) {
  auto t = store_.open(template_name);
  if (!t.ok()) co_return std::move(t).error();
  while (!draining_ && pools_[(*t)->id()].size() < size(template_name)) {
    if (creating_ > 0) {
      refill_wanted_.insert(template_name);  // goes on when the creates are done
      break;
    }
    auto r = co_await source_.prepare(*t);
    if (!r.ok()) co_return std::move(r).error();
    if (!draining_) {
      if (auto w = co_await source_.warm(*r); !w.ok()) {
        co_await source_.discard(std::move(*r));
        co_return std::move(w).error();
      }
    }
    if (draining_) {
      // Shutting down while this VM was being made: it must not outlive us.
      co_await source_.discard(std::move(*r));
      break;
    }
    // A pooled VM holds its template version: a newer build must not let
    // the garbage collector take the files under it.
    store_.acquire((*t)->id());
    pools_[(*t)->id()].push_back(std::move(*r));
  }
  co_return okStatus();
}

asio::awaitable<void> WarmPool::drain() {
  draining_ = true;
  // A fill in progress discards its VM when it sees draining_ (bounded by
  // the restore's own deadlines).
  asio::steady_timer wait(io_);
  for (int i = 0; i < 3000; ++i) {
    bool any = false;
    for (auto& [name, busy] : filling_) any = any || busy;
    if (!any) break;
    wait.expires_after(std::chrono::milliseconds(20));
    co_await wait.async_wait(asio::use_awaitable);
  }
  for (auto& [id, pool] : pools_) {
    while (!pool.empty()) {
      PreparedVm p = std::move(pool.front());
      pool.pop_front();
      store_.release(id);
      co_await source_.discard(std::move(p));
    }
  }
}

}  // namespace vessel::node
