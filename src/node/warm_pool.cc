#include "node/warm_pool.h"

#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <fstream>

#include "base/log.h"
#include "base/scope_exit.h"

namespace vessel::node {

namespace {

// Every thread of `pid` (nice is per thread on Linux; threads QEMU starts
// later inherit it from the thread that starts them).
void renice(pid_t pid, int nice) {
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec))
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(std::atoi(e.path().filename().c_str())), nice);
}

// Raising a priority back needs CAP_SYS_NICE: without it a claimed VM
// would stay behind, so pooled VMs are not lowered at all.
bool canRenice() { return ::geteuid() == 0; }

uint64_t pssMib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string k;
  uint64_t v = 0;
  while (f >> k) {
    if (k == "Pss:") {
      f >> v;
      return v / 1024;
    }
    f.ignore(1 << 12, '\n');
  }
  return 0;
}

}  // namespace

WarmPool::PerTemplate& WarmPool::per(const std::string& template_name) {
  return per_[template_name];
}

size_t WarmPool::target(const std::string& template_name) {
  auto& pt = per(template_name);
  pt.sizer.setFloor(size(template_name));
  return pt.sizer.target(PoolSizer::Clock::now());
}

void WarmPool::setBudget(const std::string& template_name, uint64_t mib) {
  per(template_name).sizer.setBudget(mib);
}

WarmPool::Stats WarmPool::stats(const std::string& template_name) const {
  Stats s;
  auto it = per_.find(template_name);
  if (it == per_.end()) {
    s.target = size(template_name);
    return s;
  }
  const auto& pt = it->second;
  s.hits = pt.hits;
  s.misses = pt.misses;
  s.pooled = pt.id.empty() ? 0 : pooled(pt.id);
  s.target = pt.sizer.target(PoolSizer::Clock::now());
  s.vm_cost_mib = pt.vm_cost_mib;
  return s;
}

std::optional<PreparedVm> WarmPool::take(const std::string& template_name,
                                         const std::string& template_id, bool count) {
  auto it = pools_.find(template_id);
  bool hit = it != pools_.end() && !it->second.empty();
  if (count) {
    auto& pt = per(template_name);
    pt.id = template_id;
    ++(hit ? pt.hits : pt.misses);
    pt.sizer.onCreate(PoolSizer::Clock::now(), hit);
    scheduleTrim(template_name);
  }
  if (!hit) return std::nullopt;
  PreparedVm p = std::move(it->second.front());
  it->second.pop_front();
  store_.release(template_id);                      // the pool's hold; the sandbox takes its own
  if (p.vm && canRenice()) renice(p.vm->pid(), 0);  // a sandbox now: as fast as any
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

void WarmPool::refillLater(const std::string& template_name) {
  if (draining_) return;
  auto& pt = per(template_name);
  size_t want = target(template_name);
  size_t have = pt.id.empty() ? 0 : pooled(pt.id);
  size_t short_by = want > have ? want - have : 0;
  // One filler per missing VM, up to kMaxFillers.
  while (pt.fillers < kMaxFillers && static_cast<size_t>(pt.fillers) < short_by) {
    ++pt.fillers;
    asio::co_spawn(
        io_,
        [this, template_name]() -> asio::awaitable<void> {
          auto s = co_await fill(template_name, true);
          --per(template_name).fillers;
          if (!s.ok())
            Logger("runtime").warn("pool refill for {}: {}", template_name, s.error().message());
        },
        asio::detached);
  }
}

asio::awaitable<Status> WarmPool::fill(const std::string& template_name, bool background) {
  auto t = store_.open(template_name);
  if (!t.ok()) co_return std::move(t).error();
  const std::string id = (*t)->id();
  auto& pt = per(template_name);
  pt.id = id;
  // The target is asked again after every VM: demand may have grown or
  // gone meanwhile. For background fillers, VMs the others are making
  // count as there; a caller of fill() wants the pool full on return.
  auto short_of_target = [&] {
    return pools_[id].size() + (background ? pt.making : 0) < target(template_name);
  };
  while (!draining_ && short_of_target()) {
    ++pt.making;
    ScopeExit made([&pt] { --pt.making; });
    auto r = co_await source_.prepare(*t);
    if (!r.ok()) co_return std::move(r).error();
    // Before it restores: the restore and warm-up are most of its CPU.
    if (r->vm && canRenice()) renice(r->vm->pid(), kPooledNice);
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
    if (r->vm) {
      // What the budget is counted in: what this VM holds once warm.
      if (uint64_t mib = pssMib(r->vm->pid()); mib > 0) {
        pt.vm_cost_mib = mib;
        pt.sizer.setVmCost(mib);
      }
    }
    // A pooled VM holds its template version: a newer build must not let
    // the garbage collector take the files under it.
    store_.acquire(id);
    pools_[id].push_back(std::move(*r));
  }
  co_return okStatus();
}

void WarmPool::scheduleTrim(const std::string& template_name) {
  auto& pt = per(template_name);
  if (!pt.sizer.adaptive() || draining_) return;
  if (!pt.trim) pt.trim = std::make_unique<asio::steady_timer>(io_);
  // One timer per template, pushed back by every create: nothing runs
  // while creates keep coming, one wake-up per idle period after.
  pt.trim->expires_after(pt.sizer.idle() + std::chrono::milliseconds(100));
  pt.trim->async_wait([this, template_name](boost::system::error_code ec) {
    if (ec) return;  // re-armed, or the pool is going away
    asio::co_spawn(io_, trim(template_name), asio::detached);
  });
}

asio::awaitable<void> WarmPool::trim(std::string template_name) {
  auto& pt = per(template_name);
  if (draining_ || pt.id.empty()) co_return;
  size_t want = target(template_name);
  auto& pool = pools_[pt.id];
  size_t n = 0;
  while (!draining_ && pool.size() > want) {
    PreparedVm p = std::move(pool.back());  // the newest: the oldest are the warmest
    pool.pop_back();
    store_.release(pt.id);
    co_await source_.discard(std::move(p));
    ++n;
  }
  if (n > 0)
    Logger("runtime").info("warm pool of {}: idle, {} VM(s) stopped, {} kept", template_name, n,
                           pool.size());
  // Still above the floor: it halves again after another idle period.
  if (want > size(template_name)) scheduleTrim(template_name);
}

asio::awaitable<void> WarmPool::drain() {
  draining_ = true;
  for (auto& [name, pt] : per_)
    if (pt.trim) pt.trim->cancel();
  // A fill in progress discards its VM when it sees draining_ (bounded by
  // the restore's own deadlines).
  asio::steady_timer wait(io_);
  for (int i = 0; i < 3000; ++i) {
    bool any = false;
    for (auto& [name, pt] : per_) any = any || pt.fillers > 0 || pt.making > 0;
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
