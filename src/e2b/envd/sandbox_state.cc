// What envd keeps for a sandbox between requests, and when it lets go of it
// (envd.h, EnvdLimits): polled watchers with their queued events and the
// process table's entries are capped per sandbox and per tenant, freed when
// the lifecycle says the sandbox ended, and freed by a sweep once the sandbox
// has not been running for keep_detached (a pause is given that long, for
// its resume to find its processes and watchers again).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <set>

#include "base/log.h"
#include "e2b/envd/services.h"

namespace vessel::e2b::envd {

namespace {

const Logger& log() {
  static const Logger l("envd");
  return l;
}

// What an event costs while queued: its strings and the JSON object's own
// allocation, roughly (the cap is on memory, not on an exact count).
size_t costOf(const json::object& ev) {
  size_t n = 64;
  for (const auto& [k, v] : ev) n += k.size() + (v.is_string() ? v.as_string().size() : 8);
  return n;
}

}  // namespace

Services::~Services() {
  // Readers and the sweep still waiting must not come back to this object.
  *alive = false;
  while (!watchers.empty()) dropWatcher(watchers.begin());
  if (sweeper) sweeper->cancel();
}

const std::string& Services::tenantOf(const std::string& sandbox_id) {
  armSweeper();  // envd is about to keep something for it
  auto it = books.find(sandbox_id);
  if (it == books.end()) {
    SandboxBook b;
    if (sandboxes.tenant_of) b.tenant = sandboxes.tenant_of(sandbox_id);
    if (b.tenant.empty()) b.tenant = "sandbox:" + sandbox_id;
    it = books.emplace(sandbox_id, std::move(b)).first;
  }
  return it->second.tenant;
}

Status Services::roomForWatcher(const std::string& sandbox_id) {
  const std::string& tenant = tenantOf(sandbox_id);
  size_t mine = 0, theirs = 0;
  for (auto it = watchers.begin(); it != watchers.end();) {
    // Watchers whose sandbox's agent went away and that hold nothing more
    // to fetch are dropped here.
    if (it->second->failed && it->second->events.empty()) {
      auto gone = it++;
      dropWatcher(gone);
      continue;
    }
    mine += it->second->sandbox_id == sandbox_id ? 1 : 0;
    theirs += it->second->tenant == tenant ? 1 : 0;
    ++it;
  }
  if (mine >= limits.watchers_per_sandbox)
    return Error(Code::kResourceExhausted, "too many watchers on this sandbox; remove some first");
  if (theirs >= limits.watchers_per_tenant)
    return Error(Code::kResourceExhausted,
                 "too many watchers on this team's sandboxes; remove some first");
  return okStatus();
}

Status Services::roomForProcess(const std::string& sandbox_id) {
  const std::string& tenant = tenantOf(sandbox_id);
  if (processes.countSandbox(sandbox_id) >= limits.processes_per_sandbox)
    return Error(Code::kResourceExhausted,
                 "too many processes tracked on this sandbox; let some end first");
  if (processes.countTenant(tenant) >= limits.processes_per_tenant)
    return Error(Code::kResourceExhausted,
                 "too many processes tracked on this team's sandboxes; let some end first");
  return okStatus();
}

asio::awaitable<Result<std::shared_ptr<ProcEntry>>> Services::attachProcess(const Target& t,
                                                                            uint32_t pid) {
  std::string sandbox_id = t.sandbox_id;
  std::function<Status()> room = [this, sandbox_id] { return roomForProcess(sandbox_id); };
  std::string tenant = tenantOf(sandbox_id);
  auto agent = t.agent;
  auto r =
      co_await processes.get(sandbox_id, std::move(agent), pid, std::move(room), std::move(tenant));
  co_return r;
}

void Services::queueEvent(Watcher& w, json::object ev) {
  size_t cost = costOf(ev);
  // Oldest first, as a client that polls too rarely would lose them anyway.
  while (!w.events.empty() &&
         (w.events.size() >= limits.watcher_events || w.bytes + cost > limits.watcher_bytes)) {
    w.bytes -= std::min(w.bytes, costOf(w.events.front()));
    w.events.pop_front();
  }
  if (cost > limits.watcher_bytes) return;  // one event larger than the whole queue
  w.bytes += cost;
  w.events.push_back(std::move(ev));
}

void Services::dropWatcher(std::map<std::string, std::shared_ptr<Watcher>>::iterator it) {
  auto w = it->second;
  watchers.erase(it);
  w->dropped = true;
  w->events.clear();
  w->bytes = 0;
  w->stop->emit(asio::cancellation_type::terminal);
}

void Services::dropSandbox(const std::string& id) {
  size_t n = 0;
  for (auto it = watchers.begin(); it != watchers.end();) {
    if (it->second->sandbox_id != id) {
      ++it;
      continue;
    }
    auto gone = it++;
    dropWatcher(gone);
    ++n;
  }
  size_t procs = processes.countSandbox(id);
  processes.dropSandbox(id);
  books.erase(id);
  if (n || procs) log().forSandbox(id).info("freed {} watchers and {} process entries", n, procs);
}

void Services::sweep() {
  std::set<std::string> held;
  for (const auto& [id, w] : watchers) held.insert(w->sandbox_id);
  for (auto& id : processes.sandboxIds()) held.insert(id);
  // Books of sandboxes holding nothing any more go too.
  for (auto it = books.begin(); it != books.end();)
    it = held.count(it->first) ? std::next(it) : books.erase(it);
  if (held.empty()) return;
  std::set<std::string> running;
  if (sandboxes.live_ids)
    for (auto& id : sandboxes.live_ids()) running.insert(std::move(id));
  auto now = std::chrono::steady_clock::now();
  for (const auto& id : held) {
    tenantOf(id);  // every held sandbox has its book
    auto& b = books[id];
    if (running.count(id)) {
      b.absent_since.reset();
      continue;
    }
    if (!b.absent_since) b.absent_since = now;
    if (now - *b.absent_since >= limits.keep_detached) dropSandbox(id);
  }
}

void Services::armSweeper() {
  if (sweeper) return;
  sweeper = std::make_shared<asio::steady_timer>(io);
  asio::co_spawn(io, sweepLoop(sweeper, alive), asio::detached);
}

asio::awaitable<void> Services::sweepLoop(std::shared_ptr<asio::steady_timer> timer,
                                          std::shared_ptr<bool> still) {
  // Runs while envd holds anything; the next watcher or process arms it again.
  for (;;) {
    timer->expires_after(limits.sweep_interval);
    auto [ec] = co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec || !*still) co_return;  // envd is going away
    sweep();
    if (watchers.empty() && processes.size() == 0) {
      sweeper.reset();
      co_return;
    }
  }
}

StateUsage Services::usage() const {
  StateUsage u;
  std::set<std::string> held;
  for (const auto& [id, w] : watchers) {
    held.insert(w->sandbox_id);
    ++u.watchers;
    u.queued_events += w->events.size();
    u.queued_bytes += w->bytes;
  }
  for (auto& id : processes.sandboxIds()) held.insert(id);
  u.sandboxes = held.size();
  u.processes = processes.size();
  return u;
}

}  // namespace vessel::e2b::envd
