#include "e2b/envd/process_table.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace vessel::e2b::envd {

// Events buffered per subscriber before the pump waits for it: a slow
// client slows its process's output, within the agent's window.
constexpr size_t kSubscriberDepth = 16;

ProcessTable::~ProcessTable() {
  for (auto& [k, e] : entries_)
    for (auto& ch : e->subscribers) ch->close();
}

std::shared_ptr<ProcEntry> ProcessTable::add(const std::string& sandbox_id,
                                             const std::string& tenant,
                                             const std::shared_ptr<agentclient::AgentClient>& agent,
                                             std::unique_ptr<agentclient::Process> p,
                                             boost::json::object config, std::string tag,
                                             bool pty) {
  auto e = std::make_shared<ProcEntry>();
  e->sandbox_id = sandbox_id;
  e->tenant = tenant;
  e->pid = p->pid();
  e->tag = std::move(tag);
  e->config = std::move(config);
  e->pty = pty;
  e->agent = agent;
  e->handle = std::shared_ptr<agentclient::Process>(std::move(p));
  entries_[{sandbox_id, e->pid}] = e;
  startPump(e);
  return e;
}

std::shared_ptr<ProcEntry> ProcessTable::find(const std::string& sandbox_id, uint32_t pid) const {
  auto it = entries_.find({sandbox_id, pid});
  return it == entries_.end() ? nullptr : it->second;
}

std::optional<uint32_t> ProcessTable::pidForTag(const std::string& sandbox_id,
                                                const std::string& tag) const {
  for (const auto& [k, e] : entries_)
    if (k.first == sandbox_id && !e->exited && !e->tag.empty() && e->tag == tag) return k.second;
  return std::nullopt;
}

asio::awaitable<Result<std::shared_ptr<ProcEntry>>> ProcessTable::get(
    const std::string& sandbox_id, std::shared_ptr<agentclient::AgentClient> agent, uint32_t pid,
    std::function<Status()> room, std::string tenant) {
  auto e = find(sandbox_id, pid);
  if (e && e->handle && e->agent.lock() == agent) co_return e;
  if (!e && room)
    if (auto st = room(); !st.ok()) co_return st.error();
  // Unknown here, or attached through an agent that is gone (a pause and
  // resume, a vesseld restart): attach through the current one.
  auto attached = co_await agent->attach(pid);
  if (!attached.ok()) {
    if (e && !e->handle) entries_.erase({sandbox_id, pid});
    Error err = std::move(attached).error();
    if (err.code() == Code::kNotFound || err.sysErrno() == ESRCH)
      co_return Error(Code::kNotFound, "process with pid " + std::to_string(pid) + " not found");
    co_return err;
  }
  if (!e) {
    e = std::make_shared<ProcEntry>();
    e->sandbox_id = sandbox_id;
    e->tenant = std::move(tenant);
    e->pid = pid;
    entries_[{sandbox_id, pid}] = e;
  }
  e->agent = agent;
  e->handle = std::shared_ptr<agentclient::Process>(std::move(*attached));
  startPump(e);
  co_return e;
}

size_t ProcessTable::countSandbox(const std::string& sandbox_id) const {
  auto lo = entries_.lower_bound({sandbox_id, 0});
  size_t n = 0;
  for (auto it = lo; it != entries_.end() && it->first.first == sandbox_id; ++it) ++n;
  return n;
}

size_t ProcessTable::countTenant(const std::string& tenant) const {
  size_t n = 0;
  for (const auto& [k, e] : entries_) n += e->tenant == tenant ? 1 : 0;
  return n;
}

std::vector<std::string> ProcessTable::sandboxIds() const {
  std::vector<std::string> ids;
  for (const auto& [k, e] : entries_)
    if (ids.empty() || ids.back() != k.first) ids.push_back(k.first);
  return ids;
}

void ProcessTable::dropSandbox(const std::string& sandbox_id) {
  auto it = entries_.lower_bound({sandbox_id, 0});
  while (it != entries_.end() && it->first.first == sandbox_id) {
    auto& e = it->second;
    for (auto& ch : e->subscribers) ch->close();
    e->subscribers.clear();
    // The pump holds its own handle and stops when it sees this one changed.
    e->handle.reset();
    it = entries_.erase(it);
  }
}

std::shared_ptr<ProcChannel> ProcessTable::subscribe(const std::shared_ptr<ProcEntry>& e) {
  auto ch = std::make_shared<ProcChannel>(io_, kSubscriberDepth);
  e->subscribers.push_back(ch);
  return ch;
}

void ProcessTable::unsubscribe(const std::shared_ptr<ProcEntry>& e,
                               const std::shared_ptr<ProcChannel>& ch) {
  ch->close();
  std::erase(e->subscribers, ch);
}

void ProcessTable::startPump(const std::shared_ptr<ProcEntry>& e) {
  // Deferred: co_spawn would run the pump inline, and events already in the
  // stream's inbox (a short command's whole life) would go out before the
  // caller that started it has subscribed.
  asio::post(io_, [this, e, h = e->handle] { asio::co_spawn(io_, pump(e, h), asio::detached); });
}

asio::awaitable<void> ProcessTable::pump(std::shared_ptr<ProcEntry> e,
                                         std::shared_ptr<agentclient::Process> h) {
  // Every event to every subscriber (agentclient/event_pump.h reads them).
  auto fanOut = [this, e, h](ProcItem item) -> asio::awaitable<bool> {
    if (e->handle != h) co_return false;  // replaced by a re-attach meanwhile
    // Copy: a subscriber may leave while we wait on another.
    auto subs = e->subscribers;
    for (auto& ch : subs) {
      if (!ch->is_open()) continue;
      boost::system::error_code none;
      (void)co_await ch->async_send(none, item, asio::as_tuple(asio::use_awaitable));
    }
    if (!agentclient::endsStream(item)) co_return true;
    if (!item.error) {
      e->exited = true;
      auto it = entries_.find({e->sandbox_id, e->pid});
      if (it != entries_.end() && it->second == e) entries_.erase(it);
    } else {
      // The channel failed: keep the entry, detached, for a re-attach.
      e->handle.reset();
    }
    co_return false;
  };
  co_await agentclient::pumpEvents<agentclient::ProcessEvent>(h, std::move(fanOut));
}

}  // namespace vessel::e2b::envd
