#pragma once
// VMs restored ahead of time so that a create only has to claim one
// (Runtime owns one WarmPool). Per template version: a deque of ready VMs,
// filled in the background after creates, sized from demand (PoolSizer),
// drained at shutdown. How a VM is made ready is the Source's business
// (Runtime: restore, warm, network). Used from one io thread.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agentclient/agent_client.h"
#include "hypervisor/hypervisor.h"
#include "node/guest_network.h"
#include "node/network/slot.h"
#include "node/pool_sizer.h"
#include "templates/store.h"

namespace vessel::node {

namespace asio = boost::asio;

// A QEMU started for a template's (or a fork's) state; pooled ones may be
// warm already.
struct PreparedVm {
  std::string vm_id, vm_dir;
  std::unique_ptr<hypervisor::Vm> vm;
  std::shared_ptr<const templates::Template> tmpl;
  std::shared_ptr<agentclient::AgentClient> agent;  // set once warm (restored and running)
  std::optional<GuestNetwork> net;  // what the guest's network is set up as, if it is
  std::unique_ptr<network::Slot> slot;
  // What its disk and root filesystem were grown to while it waited (the
  // template's default disk; 0: not grown). A create that asks for this
  // size pays no grow; one that asks for less does not take it.
  uint64_t disk_mib = 0;
};

class WarmPool {
 public:
  // Makes and unmakes pooled VMs.
  class Source {
   public:
    virtual ~Source() = default;
    // A QEMU waiting for the template's state.
    virtual asio::awaitable<Result<PreparedVm>> prepare(
        std::shared_ptr<const templates::Template> t) = 0;
    // Takes it as far as the pool mode says (may do nothing).
    virtual asio::awaitable<Status> warm(PreparedVm& p) = 0;
    virtual asio::awaitable<void> discard(PreparedVm p) = 0;
  };

  WarmPool(asio::io_context& io, templates::TemplateStore& store, Source& source,
           size_t default_size)
      : io_(io), store_(store), source_(source), default_size_(default_size) {}

  // A ready VM of template version `template_id` (a create of
  // `template_name`), if one waits; the pool's hold on the template version
  // goes with it (the caller takes its own). Counted as a hit or a miss for
  // the pool's sizing and /metrics unless `count` is false (a retry).
  std::optional<PreparedVm> take(const std::string& template_name, const std::string& template_id,
                                 bool count = true);

  // Starts QEMU processes for `template_name` until the pool holds its
  // target (`background`: counting VMs other fillers are making).
  asio::awaitable<Status> fill(const std::string& template_name, bool background = false);
  // Fills the pool in the background (failures are logged). Pooled VMs are
  // made at a lower CPU priority than creates (kPooledNice): a refill never
  // holds a create back, it uses what the creates leave.
  void refillLater(const std::string& template_name);
  // Stops every pooled QEMU process, after waiting for fills in progress;
  // nothing is pooled afterwards.
  asio::awaitable<void> drain();

  size_t pooled(const std::string& template_id) const;
  std::vector<pid_t> pooledPids(const std::string& template_id) const;
  void setDefaultSize(size_t n) { default_size_ = n; }
  // The floor: VMs kept even when idle (vesseld --warm-pool).
  void setSize(const std::string& template_name, size_t n) { sizes_[template_name] = n; }
  size_t size(const std::string& template_name) const;
  // Sizing from demand within `mib` of pooled VMs' memory (PoolSizer);
  // 0: the pool holds exactly size().
  void setBudget(const std::string& template_name, uint64_t mib);

  struct Stats {
    uint64_t hits = 0, misses = 0;
    size_t pooled = 0, target = 0;
    uint64_t vm_cost_mib = 0;  // measured PSS of a pooled VM (0: not yet)
  };
  Stats stats(const std::string& template_name) const;

  // Nice value of pooled VMs' QEMU threads until a create claims one.
  static constexpr int kPooledNice = 10;
  // VMs made at once for one template while it is more than one short:
  // one at a time cannot keep up with a loop of creates.
  static constexpr int kMaxFillers = 2;

 private:
  struct PerTemplate {
    PoolSizer sizer;
    int fillers = 0;    // refillLater's fill() coroutines running
    size_t making = 0;  // VMs being made for the pool right now
    uint64_t hits = 0, misses = 0, vm_cost_mib = 0;
    std::string id;  // the version last filled or taken
    std::unique_ptr<asio::steady_timer> trim;
  };
  PerTemplate& per(const std::string& template_name);
  size_t target(const std::string& template_name);
  // Discards pooled VMs above the target once the template has been idle.
  void scheduleTrim(const std::string& template_name);
  asio::awaitable<void> trim(std::string template_name);

  asio::io_context& io_;
  templates::TemplateStore& store_;
  Source& source_;
  size_t default_size_;
  std::map<std::string, std::deque<PreparedVm>> pools_;  // template id -> ready QEMUs
  std::map<std::string, PerTemplate> per_;               // template name -> its sizing
  std::map<std::string, size_t> sizes_;                  // template name -> its own floor
  bool draining_ = false;
};

}  // namespace vessel::node
