#pragma once
// The sandbox runtime of one node: creates sandboxes by restoring a
// template's snapshot (from a pool of QEMU processes already waiting for
// their state), gives each a fresh identity before any user command runs,
// and pauses, resumes, forks and destroys them. Used from one io thread.
//
// On disk, under RuntimeOptions::root:
//   <root>/vms/<vm-id>/        disk.qcow2 (overlay on the template's rootfs),
//                              console.log, run/ (QEMU sockets)
//   <root>/sandboxes/<id>/     sandbox.json, pause.state (while paused)
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agentclient/agent_client.h"
#include "base/new_id.h"
#include "hypervisor/hypervisor.h"
#include "node/guest_network.h"
#include "node/machine.h"
#include "node/network/slot_pool.h"
#include "node/sandbox_file.h"
#include "node/warm_pool.h"
#include "templates/store.h"

namespace vessel::node {

struct RuntimeOptions {
  std::string root;
  std::string kernel;
  hypervisor::Accel accel = hypervisor::Accel::kTcg;
  // VMs per template kept ready for creates, unless setPoolSize() named
  // the template.
  size_t pool_size = 2;
  // How far a pooled VM is taken before a create claims it.
  //  kWarm: restored, running, its agent reconnected and one command run;
  //    a create only gives the guest its identity. Under TCG a fresh QEMU
  //    translates every guest instruction the first time it runs, so the
  //    first tens of milliseconds of guest time after a restore cost
  //    hundreds of wall-clock ones; the warm pool pays them before the
  //    create. A warm VM costs its idle memory while it waits.
  //  kIncoming: QEMU waits in -incoming defer; a create pays the restore.
  enum class PoolMode { kWarm, kIncoming };
  PoolMode pool_mode = PoolMode::kWarm;
  // Grow each sandbox's disk and root filesystem to its disk_mib (QMP
  // block_resize + GrowRootFs). Off only under the fake hypervisor, whose
  // host-run agent has no block device of its own to grow.
  bool grow_disks = true;
  // kWarm: also run that one command. Off, a create's first command pays
  // for translating the exec path under TCG (about 180 ms more), and the
  // sandbox's idle memory after it is the same: the translations land in
  // its code buffer either way (bench/create measures both). For the
  // benchmark; vesseld keeps it on.
  bool warm_exec = true;
  std::chrono::seconds ready_timeout{60};
  // Host-side deadline on each call into a guest on the create, restore
  // and fork paths (identity, guest network): a guest that stops answering
  // fails its own sandbox instead of holding it forever.
  std::chrono::milliseconds guest_call_timeout{15000};
  // The agent client's reply deadline (AgentClient::setReplyTimeout) for
  // every sandbox's channel: a tenant's exec, file or process call whose
  // answer has not begun by then fails with a clear error instead of
  // hanging on a guest whose agent is stopped or starved. 0: none.
  std::chrono::milliseconds agent_reply_timeout{30000};
  // The guest network most creates ask for (egress on: route + CA). A warm
  // pooled VM with a slot is set up so ahead of time; a create that asks
  // for it pays nothing, one that asks for another pays one exec.
  std::optional<GuestNetwork> warm_network;
  // Network slots for sandbox NICs (owned by the caller). Null: a VM's NIC
  // (templates have one) is connected to nothing.
  network::SlotPool* slots = nullptr;
};

struct CreateOptions {
  std::string id;        // empty: generated
  std::string hostname;  // empty: the id
  std::vector<std::string> env;
  bool cold = false;  // boot the template's disk instead of restoring its snapshot
  GuestNetwork network;
  // The root disk's size in MiB, at least the template image's; the guest's
  // device and filesystem are grown to it before the create returns. A
  // resumed or forked sandbox keeps it. 0: the template image's size.
  uint64_t disk_mib = 0;
};

class Sandbox {
 public:
  enum class State { kRunning, kPaused };
  const std::string& id() const { return id_; }
  State state() const { return state_; }
  const std::string& templateId() const { return template_id_; }
  // The agent of a running sandbox (null while paused).
  const std::shared_ptr<agentclient::AgentClient>& agent() const { return agent_; }
  hypervisor::Vm* vm() const { return vm_.get(); }
  const std::string& dir() const { return dir_; }
  const std::string& vmDir() const { return vm_dir_; }
  // How long each phase of this sandbox's last create or resume took, in
  // order (for logs and bench/create's breakdown).
  const std::vector<std::pair<std::string, double>>& phases() const { return phases_ms_; }
  // Its network slot while it has a VM with a tap (null otherwise).
  const network::Slot* slot() const { return slot_.get(); }
  // Its root disk's size (0: the template image's, an old record).
  uint64_t diskMib() const { return disk_mib_; }
  uint64_t memoryMib() const { return memory_mib_; }
  unsigned vcpus() const { return vcpus_; }
  // Its template's start command's guest pid in this VM's memory (0: none,
  // or a memory that began with a boot); vesseld follows its output.
  uint32_t startPid() const { return start_pid_; }

 private:
  friend class Runtime;
  std::string id_, dir_, vm_dir_, template_id_, hostname_;
  std::vector<std::string> env_;
  GuestNetwork net_;
  std::unique_ptr<network::Slot> slot_;
  unsigned vcpus_ = 1;
  uint64_t memory_mib_ = 256;
  uint64_t disk_mib_ = 0;
  uint32_t start_pid_ = 0;
  State state_ = State::kRunning;
  bool disk_only_ = false;  // paused without its memory
  std::unique_ptr<hypervisor::Vm> vm_;
  std::shared_ptr<agentclient::AgentClient> agent_;
  std::vector<std::pair<std::string, double>> phases_ms_;
};

class Runtime : private WarmPool::Source {
 public:
  Runtime(asio::io_context& io, hypervisor::Hypervisor& hv, templates::TemplateStore& store,
          RuntimeOptions opts);
  ~Runtime();
  templates::TemplateStore& templates() { return store_; }

  asio::awaitable<Result<std::shared_ptr<Sandbox>>> create(std::string template_name,
                                                           CreateOptions opts);
  // Saves memory, disk and device state into the sandbox's directories and
  // frees the VM. `keep_memory` false keeps only its disk: the guest's
  // filesystems are synced, the VM stopped, and resume() boots the
  // template's kernel on that disk (a new boot: processes gone, files kept).
  asio::awaitable<Status> pause(Sandbox& sb, bool keep_memory = true);
  // Restores a paused sandbox, also one paused by an earlier vesseld.
  asio::awaitable<Result<std::shared_ptr<Sandbox>>> resume(const std::string& id);
  // Snapshots a running sandbox (briefly paused) into `count` new sandboxes.
  asio::awaitable<Result<std::vector<std::shared_ptr<Sandbox>>>> fork(Sandbox& sb, int count);
  // The same with the new sandboxes' ids chosen by the caller (the API
  // records them before the fork runs); one copy per id.
  asio::awaitable<Result<std::vector<std::shared_ptr<Sandbox>>>> forkAs(
      Sandbox& sb, std::vector<std::string> ids);
  // Snapshots a running sandbox (briefly paused) into a new template named
  // `name`, whose creates start from the sandbox's memory, processes and
  // disk as they were. The new version is installed in the template store;
  // the original carries on.
  asio::awaitable<Result<std::shared_ptr<const templates::Template>>> forkToTemplate(
      Sandbox& sb, std::string name);
  // Stops the VM (if it has one: a paused sandbox is not restored) and
  // deletes every file of the sandbox.
  asio::awaitable<Status> destroy(Sandbox& sb);
  // The same for a sandbox nobody holds any more (a failed one whose files
  // remain), from its directory and record; nothing there is not an error.
  Status discardFiles(const std::string& id);
  // Kills the VM a create, resume or fork is making for sandbox `id` right
  // now, so that call fails promptly (a guest that does not answer); a
  // no-op when none is.
  void abort(const std::string& id);

  // Lets go of a running sandbox without stopping it, for the next vesseld
  // to adopt(): its QEMU keeps running; its files and its network slot
  // stay (SlotPool::handOver).
  void release(Sandbox& sb);
  // After a restart (even a kill -9): takes over a sandbox an earlier
  // vesseld left, from its sandbox.json. A running one gets its QEMU back
  // (the recorded pid, verified by start time and command line) with QMP,
  // console and agent reconnected (the agent resynchronised, its processes
  // still running); a paused one needs nothing. A running one with a
  // network slot gets its slot back from the pool's leftovers
  // (SlotPool::adopt); the caller registers its policy with the gateway
  // again. If the slot cannot be taken over, the VM is stopped: it would
  // have a dead or unpoliced network. An error says why a sandbox cannot be
  // taken over (the VM died, the record is missing or unreadable, its slot
  // is incomplete); the caller then discards it with discardOrphans().
  asio::awaitable<Result<std::shared_ptr<Sandbox>>> adopt(const std::string& id);
  // Removes every sandbox directory not in `keep` and every VM directory
  // no kept sandbox uses, stopping any QEMU still serving one (left by a
  // create or pool refill in flight when the earlier vesseld died).
  // Returns how many directories went.
  asio::awaitable<int> discardOrphans(std::set<std::string> keep);

  // The warm pool (WarmPool).
  // Starts QEMU processes for `template_name` until the pool is full.
  asio::awaitable<Status> fillPool(const std::string& template_name) {
    return pool_.fill(template_name);
  }
  size_t pooled(const std::string& template_id) const { return pool_.pooled(template_id); }
  // The QEMU processes pooled for a template (diagnostics and tests).
  std::vector<pid_t> pooledPids(const std::string& template_id) const {
    return pool_.pooledPids(template_id);
  }
  // Stops every pooled QEMU process, after waiting for fills in progress;
  // nothing is pooled afterwards.
  asio::awaitable<void> drainPools() { return pool_.drain(); }
  void setPoolSize(size_t n) { pool_.setDefaultSize(n); }
  // `template_name`'s own pool size (vesseld --warm-pool); others keep
  // RuntimeOptions::pool_size.
  void setPoolSize(const std::string& template_name, size_t n) { pool_.setSize(template_name, n); }
  size_t poolSize(const std::string& template_name) const { return pool_.size(template_name); }
  // Sizes `template_name`'s pool from demand within `mib` of pooled VMs'
  // memory, poolSize() the floor (vesseld --warm-pool-budget); 0: fixed.
  void setPoolBudget(const std::string& template_name, uint64_t mib) {
    pool_.setBudget(template_name, mib);
  }
  WarmPool::Stats poolStats(const std::string& template_name) const {
    return pool_.stats(template_name);
  }
  // Fills the template's pool in the background (failures are logged).
  void keepPoolFull(const std::string& template_name) { pool_.refillLater(template_name); }
  // Applies to VMs pooled from now on.
  void setPoolMode(RuntimeOptions::PoolMode m) { opts_.pool_mode = m; }
  void setWarmExec(bool on) { opts_.warm_exec = on; }

 private:
  using Prepared = PreparedVm;
  // create(), runtime.cc: one attempt that undoes itself unless committed,
  // and the two ways it makes the sandbox's VM.
  class CreateAttempt;
  asio::awaitable<Status> createCold(CreateAttempt& attempt, const templates::Template& t);
  asio::awaitable<Status> createRestored(CreateAttempt& attempt, const std::string& template_name,
                                         std::shared_ptr<const templates::Template> t);
  asio::awaitable<Result<Prepared>> prepareRestore(std::shared_ptr<const templates::Template> t,
                                                   const std::string& state_file,
                                                   const std::string& base_disk,
                                                   const std::string& base_format,
                                                   bool template_memory);
  // The spec every sandbox VM shares: its overlay, sockets and console in
  // vm_dir. `backing`: the one file the overlay may be backed by, its
  // template's image (the record's template, never what the overlay's
  // header says: its QEMU could have rewritten that).
  hypervisor::MachineSpec machineSpec(const std::string& vm_dir, unsigned vcpus,
                                      uint64_t memory_mib, const std::string& cmdline,
                                      const std::string& backing) const;
  // Loads the state a VM was started for, runs it and takes over its agent.
  // `from_template`: the state is a template's (RAM shared with the template
  // file, agent channel idle at the snapshot) rather than a sandbox's own.
  asio::awaitable<Result<std::shared_ptr<agentclient::AgentClient>>> restoreVm(
      hypervisor::Vm& vm, bool from_template, std::string name,
      std::vector<std::pair<std::string, double>>& phases);
  // WarmPool::Source: a QEMU for the template's own snapshot, taken as far
  // as RuntimeOptions::pool_mode says.
  asio::awaitable<Result<Prepared>> prepare(std::shared_ptr<const templates::Template> t) override;
  asio::awaitable<Status> warm(Prepared& p) override;
  asio::awaitable<Status> finishRestore(Sandbox& sb, bool ignore_shared);
  // Pause and resume of a sandbox kept as its disk alone.
  asio::awaitable<Status> pauseDiskOnly(Sandbox& sb);
  asio::awaitable<Status> bootDisk(Sandbox& sb, const templates::Template& t);
  asio::awaitable<void> discard(Prepared p) override;
  // Entropy, clock, hostname, env; then the guest network unless the guest
  // is set up as `net_done` says already.
  // Bounded by guest_call_timeout.
  asio::awaitable<Status> applyIdentity(Sandbox& sb,
                                        const std::optional<GuestNetwork>& net_done = std::nullopt);
  asio::awaitable<Status> identityCalls(Sandbox& sb, const std::optional<GuestNetwork>& net_done);
  // Grows a new sandbox's root disk to disk_mib_: the image (QMP
  // block_resize), then the guest's filesystem (GrowRootFs).
  // Grows the sandbox's disk to its disk_mib unless it is already that size
  // (`grown_mib`: what a pooled VM was grown to ahead of time).
  asio::awaitable<Status> growDisk(Sandbox& sb, uint64_t grown_mib = 0);
  asio::awaitable<Status> growDiskTo(hypervisor::Vm& vm,
                                     std::shared_ptr<agentclient::AgentClient> agent, uint64_t mib,
                                     const std::string& name);
  // Gives a VM of template `m` its NIC: a slot's tap when there are slots.
  asio::awaitable<Status> attachNetwork(hypervisor::MachineSpec& s, const templates::Manifest& m,
                                        std::unique_ptr<network::Slot>& slot);
  asio::awaitable<void> releaseSlot(std::unique_ptr<network::Slot>& slot);
  // Sets the guest's network up as `want` (from `was`: what it is now, if
  // known); needs the VM's slot for a route.
  asio::awaitable<Status> configureGuestNetwork(agentclient::AgentClient& agent,
                                                const network::Slot* slot, const GuestNetwork& want,
                                                const std::optional<GuestNetwork>& was);
  Status writeRecord(const Sandbox& sb);
  // sandbox.json of `id`: the sandbox with what every record has, and the
  // whole record in `file`. kNotFound without a record, kInternal if corrupt.
  Result<std::shared_ptr<Sandbox>> readRecord(const std::string& id, SandboxFile& file) const;
  // VMs being made for a sandbox id (abort() kills them), registered for
  // the duration of a create, resume or fork.
  std::map<std::string, hypervisor::Vm*> making_;
  std::set<std::string> aborted_;  // ids abort() was called for while making
  Status checkAborted(const std::string& id) const;

  asio::io_context& io_;
  hypervisor::Hypervisor& hv_;
  templates::TemplateStore& store_;
  RuntimeOptions opts_;
  WarmPool pool_;
  // Hashing a template's files (GiBs) after a fork into a template: never
  // on the io thread.
  std::unique_ptr<asio::thread_pool> hashing_ = std::make_unique<asio::thread_pool>(1);
};

using vessel::newId;

}  // namespace vessel::node
