#pragma once
// The in-process node: ops::Node over this machine's node::Runtime (VMs),
// its egress gateway (EgressPolicies registers each VM's policy) and its
// template builds (node::TemplateWorker). It also
// supervises: every sandbox it runs is watched, and a VM that exits or an
// agent channel that fails without anyone asking is released (VM, network
// slot, files) and reported to the lifecycle within the same turn of the
// io loop.
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agentclient/agent_client.h"
#include "node/runtime.h"
#include "node/template_worker.h"
#include "ops/node.h"
#include "vesseld/console_tail.h"
#include "vesseld/egress_policies.h"
#include "vesseld/start_output.h"

namespace vessel::vesseld {

namespace asio = boost::asio;

class LocalNode final : public ops::Node {
 public:
  // `network` may be null: sandboxes then get no network (mode none only).
  LocalNode(asio::io_context& io, node::Runtime& runtime, EgressPolicies* network)
      : io_(io), runtime_(runtime), network_(network) {}
  ~LocalNode() override;

  void onLost(LostHandler h) override { lost_ = std::move(h); }
  Status prepareNetwork(const std::string& tenant, const std::string& id,
                        const std::optional<ops::NetworkSpec>& spec) override;
  Status inheritNetwork(const std::string& parent, const std::string& child) override;
  asio::awaitable<Result<ops::NetworkSpec>> updateNetwork(std::string tenant, std::string id,
                                                          ops::NetworkSpec spec) override;
  Result<ops::NetworkSpec> network(const std::string& id) override;
  asio::awaitable<void> credentialChanged(std::string tenant, std::string name) override;
  asio::awaitable<Status> create(ops::NodeCreate c) override;
  asio::awaitable<Status> pause(std::string id, bool keep_memory) override;
  asio::awaitable<Status> resume(std::string tenant, std::string id) override;
  asio::awaitable<Result<std::vector<Status>>> fork(std::string tenant, std::string id,
                                                    std::vector<std::string> copies) override;
  asio::awaitable<Result<templates::Manifest>> forkToTemplate(std::string id,
                                                              std::string stored_name) override;
  // On the TemplateWorker's thread; its callbacks come back to the io thread.
  Status build(ops::BuildRequest req, ops::BuildCallbacks cb) override;
  asio::awaitable<Status> destroy(std::string id) override;
  void abort(const std::string& id) override { runtime_.abort(id); }
  ops::Holding holding(const std::string& id) const override;
  // A call for `id` (create, pause, resume, fork, destroy, adopt) is in
  // flight here (ops::NodeSupervisor leaves such a sandbox to its caller).
  bool busy(const std::string& id) const { return busy_.count(id) > 0; }
  asio::awaitable<Result<ops::Usage>> usage(std::string id) override;
  // The agent of a running sandbox, for the front ends: it carries the
  // command log's observer (setCommandLog), so every front end's commands
  // are logged where they reach the guest, once.
  std::shared_ptr<agentclient::AgentClient> agent(const std::string& id) override;
  using CommandLogFor =
      std::function<std::shared_ptr<agentclient::CommandObserver>(const std::string& id)>;
  void setCommandLog(CommandLogFor make) { command_log_ = std::move(make); }
  // Its sandboxes' consoles go to their logs (vesseld/console_tail.h),
  // read once a second while this node and `log` live, and so does their
  // template's start command's output (vesseld/start_output.h).
  void setConsoleLog(std::shared_ptr<ops::SandboxLog*> log);
  asio::awaitable<Result<ops::Holding>> adopt(std::string tenant, std::string id) override;
  asio::awaitable<int> discardOrphans(std::set<std::string> keep) override;
  asio::awaitable<std::vector<std::string>> shutdown(bool stop_vms) override;

  // Lets build() build templates (without it, builds are kUnavailable).
  void enableTemplateBuilds(node::TemplateBuildEnv env);

  // What it holds now: the ids of its sandboxes (running or paused) and
  // the memory and vCPUs of those with a VM (a cluster node's heartbeat).
  struct Load {
    std::vector<std::string> ids;
    uint64_t memory_mib = 0;
    unsigned vcpus = 0;
  };
  Load load() const;

  // The sandbox's runtime object while held (tests and benchmarks).
  std::shared_ptr<node::Sandbox> sandbox(const std::string& id) const;

 private:
  // usage(), measured at once (the VM's /proc and its disk file).
  Result<ops::Usage> measure(const std::string& id);
  struct Held {
    std::string tenant;
    std::shared_ptr<node::Sandbox> sb;
    uint64_t watch = 0;  // the watcher that may report it lost (0: none)
  };
  // A VM just came up for `id`: its gateway registration (a failure
  // destroys it), then it is held and watched.
  asio::awaitable<Status> takeUp(const std::string& tenant, std::shared_ptr<node::Sandbox> sb);
  void watch(const std::string& id);
  asio::awaitable<void> watchLoop(std::string id, uint64_t gen);
  asio::awaitable<void> consoleLoop();
  // Follows the start command `pid` of the VM watcher `gen` watches, into
  // the log, until it exits, the VM goes or the log's bound is reached.
  asio::awaitable<void> startLoop(std::string id, uint64_t gen, uint32_t pid);
  // The console's last lines before its VM goes (`last`), or a new VM's
  // console from its start.
  void consoleDone(const std::string& id, const node::Sandbox& sb);
  void consoleRestart(const std::string& id) {
    if (console_) console_->restart(id);
  }

  // Marks `id` busy while a call for it runs (a coroutine frame may outlive
  // this node when the io context goes first: then it touches nothing).
  class BusyMark {
   public:
    BusyMark(LocalNode& n, std::string id) : n_(n), id_(std::move(id)), alive_(n.alive_) {
      ++n_.busy_[id_];
    }
    ~BusyMark() {
      if (alive_.expired()) return;
      if (auto it = n_.busy_.find(id_); it != n_.busy_.end() && --it->second == 0)
        n_.busy_.erase(it);
    }
    BusyMark(const BusyMark&) = delete;
    BusyMark& operator=(const BusyMark&) = delete;

   private:
    LocalNode& n_;
    std::string id_;
    std::weak_ptr<bool> alive_;
  };

  asio::io_context& io_;
  node::Runtime& runtime_;
  EgressPolicies* network_;
  LostHandler lost_;
  CommandLogFor command_log_;
  std::unique_ptr<ConsoleTail> console_;
  std::unique_ptr<StartOutput> start_;
  std::map<std::string, Held> held_;
  std::map<std::string, node::GuestNetwork> pending_net_;  // prepared, not created yet
  struct CpuSample {
    pid_t pid = 0;
    uint64_t ticks = 0;
    std::chrono::steady_clock::time_point at;
  };
  std::map<std::string, CpuSample> cpu_samples_;  // the previous usage() per sandbox
  std::map<std::string, int> busy_;               // ids with calls in flight, and how many
  uint64_t next_watch_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Last: stopped (its thread joined) before anything else goes.
  std::unique_ptr<node::TemplateWorker> builder_;
};

}  // namespace vessel::vesseld
