#pragma once
// The processes envd started or reconnected to, per sandbox. E2B's processes
// outlive the stream that started them: clients reconnect by pid (or tag),
// send input and signals with no stream open, and do so again after a pause
// and resume. The agent gives one attached stream per process; this table
// holds it for as long as the process runs, reads it continuously (output
// nobody listens to is dropped, as envd drops it) and fans each event out
// to every subscriber (a Start or Connect stream). When the agent's channel
// fails (the sandbox paused or died) the subscribers get the error and the
// entry waits, detached, for the next call to re-attach it through the
// sandbox's new agent.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/object.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentclient/agent_client.h"
#include "agentclient/event_pump.h"

namespace vessel::e2b::envd {

namespace asio = boost::asio;

// One event for a subscriber: output, the exit, or why the source failed.
using ProcItem = agentclient::StreamItem<agentclient::ProcessEvent>;
using ProcChannel = agentclient::EventChannel<agentclient::ProcessEvent>;

struct ProcEntry {
  std::string sandbox_id;
  std::string tenant;  // for the per-tenant cap
  uint32_t pid = 0;
  std::string tag;             // "" when none was given
  boost::json::object config;  // ProcessConfig as the client sent it (for List)
  bool pty = false;
  std::weak_ptr<agentclient::AgentClient> agent;  // what `handle` belongs to
  std::shared_ptr<agentclient::Process> handle;   // null while detached
  std::vector<std::shared_ptr<ProcChannel>> subscribers;
  bool exited = false;
};

class ProcessTable {
 public:
  explicit ProcessTable(asio::io_context& io) : io_(io) {}
  ~ProcessTable();

  // A process just started through `agent`; its events start flowing.
  std::shared_ptr<ProcEntry> add(const std::string& sandbox_id, const std::string& tenant,
                                 const std::shared_ptr<agentclient::AgentClient>& agent,
                                 std::unique_ptr<agentclient::Process> p,
                                 boost::json::object config, std::string tag, bool pty);
  // The process `pid` of the sandbox, attached through `agent` (attaching
  // or re-attaching as needed); not_found if the guest has no such process.
  // `room` says whether a new entry fits the caps (called only when one
  // would be made).
  asio::awaitable<Result<std::shared_ptr<ProcEntry>>> get(
      const std::string& sandbox_id, std::shared_ptr<agentclient::AgentClient> agent, uint32_t pid,
      std::function<Status()> room = {}, std::string tenant = {});
  // The pid of the running process with `tag`, if this table knows it.
  std::optional<uint32_t> pidForTag(const std::string& sandbox_id, const std::string& tag) const;
  // What the table knows of a pid (for List), without attaching.
  std::shared_ptr<ProcEntry> find(const std::string& sandbox_id, uint32_t pid) const;

  // Entries held for a sandbox, for a tenant (ProcEntry::tenant), in all.
  size_t countSandbox(const std::string& sandbox_id) const;
  size_t countTenant(const std::string& tenant) const;
  size_t size() const { return entries_.size(); }
  // The sandboxes with entries.
  std::vector<std::string> sandboxIds() const;
  // Forgets every entry of the sandbox (it ended): subscribers see their
  // channel closed, pumps stop at their next event.
  void dropSandbox(const std::string& sandbox_id);

  // A channel that receives every later event of `e`, up to its exit.
  std::shared_ptr<ProcChannel> subscribe(const std::shared_ptr<ProcEntry>& e);
  void unsubscribe(const std::shared_ptr<ProcEntry>& e, const std::shared_ptr<ProcChannel>& ch);

 private:
  using Key = std::pair<std::string, uint32_t>;
  void startPump(const std::shared_ptr<ProcEntry>& e);
  asio::awaitable<void> pump(std::shared_ptr<ProcEntry> e, std::shared_ptr<agentclient::Process> h);

  asio::io_context& io_;
  std::map<Key, std::shared_ptr<ProcEntry>> entries_;
};

}  // namespace vessel::e2b::envd
