#pragma once
// A Hypervisor without a VMM, for fast unit tests of node::Runtime and what
// sits on it (vesseld's LocalNode, ops::Lifecycle). A "VM" is the real
// vessel-agent run on the host (`--channel-fd`) as the agent channel's peer,
// so the node's handshake, resync, identity and exec paths run for real.
//
// Each agent runs in its own user, PID, UTS, mount and IPC namespaces, as
// the init of its PID namespace: what a test's commands start dies with it,
// and the identity the node gives it (hostname) stays inside. A seccomp
// filter hands the calls that would reach the host (clock_settime and the
// other clock setters, the RND* entropy ioctls) to this process, which
// answers them with success without running them — or, for a test that
// asks (stallGuestCalls), never answers: the guest's PID 1 is then stuck as
// a guest that stops answering would be.
//
// What a fake VM is not:
//  - Memory is not preserved. saveState writes a small state file naming
//    the machine's shape; an `incoming` start runs a fresh agent (stopped
//    until resumeVcpus), which the node's resync takes over as it would a
//    restored one. Processes and files a guest command made are not in it.
//  - pause/resume of the vCPUs is SIGSTOP/SIGCONT of the agent alone (its
//    children run on).
//  - stop() is QEMU's `quit`: the guest is not asked, the agent gets SIGKILL
//    (a SIGTERM would be discarded by the kernel: the agent is its PID
//    namespace's init and has no handler).
//  - Disks are plain files: createOverlay and copyDisk copy (reflink when
//    the filesystem can, else sparse), flattenDisk copies; on a disk thread
//    of the hypervisor's, never the io thread (as QEMU's copies run in a
//    child process), so a test can hold a copy there (onDiskCopy).
//  - release()/adopt() work within one FakeHypervisor: a released VM keeps
//    running, held by the hypervisor, until a later Runtime adopts it by its
//    run_dir (a "restart" in one test process) or the hypervisor goes.
//
// Used from one io thread, like the Runtime.
#include <sys/types.h>

#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hypervisor/hypervisor.h"
#include "templates/store.h"

namespace vessel::hypervisor::testing {

struct FakeOptions {
  std::string agent_binary;  // vessel-agent
};

// What a fake state file records: the shape a restore must match, as QEMU
// refuses a state for another machine.
struct FakeState {
  unsigned vcpus = 1;
  uint64_t memory_mib = 256;
  bool network_device = false;
  // The RAM is not in the file but in the machine's shared memory file (a
  // template's state, saved with ignore_shared): loading it needs one.
  bool ram_external = false;
};
Status writeFakeState(const std::string& path, const FakeState& s);

// Installs template `name` (1 vCPU, `memory_mib`) into `store`, made in
// `staging`: a few bytes of root filesystem and RAM and a fake state, all
// the fake hypervisor needs to restore sandboxes from it. The memory is
// only a number to the fake (placement counts it; nothing is allocated).
// `network`: the template has a virtio-net device (its sandboxes take an
// egress slot when the runtime has a pool).
Status installFakeTemplate(templates::TemplateStore& store, const std::string& staging,
                           const std::string& name, uint64_t memory_mib = 64, bool network = false);
Result<FakeState> parseFakeState(std::string_view text);

class FakeVm;
struct FakeShared;

class FakeHypervisor final : public Hypervisor {
 public:
  explicit FakeHypervisor(FakeOptions opts);
  // Kills and reaps every VM still released to it.
  ~FakeHypervisor() override;

  std::string_view name() const override { return "fake"; }
  asio::awaitable<Result<std::unique_ptr<Vm>>> start(MachineSpec spec,
                                                     Clock::time_point deadline) override;
  asio::awaitable<Result<std::unique_ptr<Vm>>> adopt(MachineSpec spec, pid_t pid,
                                                     uint64_t start_ticks,
                                                     Clock::time_point deadline) override;
  asio::awaitable<Status> stopOrphan(std::string run_dir) override;
  asio::awaitable<Status> createOverlay(std::string path, std::string backing,
                                        std::string backing_format) override;
  asio::awaitable<Status> copyDisk(std::string from, std::string to) override;
  asio::awaitable<Status> flattenDisk(Disk overlay, std::string to, uint64_t max_bytes) override;

  // Faults, by the VM's pid (Vm::pid()), behind the node's back.
  // The guest stops answering: SIGSTOP, which the Vm does not know of.
  Status hang(pid_t pid);
  // The VM dies: SIGKILL.
  Status crash(pid_t pid);
  // From now on, the guests' clock and entropy calls (the node's identity
  // calls after every restore) are held unanswered; their agents stop
  // answering. `on_stall` runs (on the io thread) for each held call.
  void stallGuestCalls(bool on, std::function<void()> on_stall = {});
  size_t stalledCalls() const;
  // `hook` runs on the disk thread before each copyDisk copies (a fork's
  // snapshot and copies): a test can hold a copy there and watch the io
  // thread serve meanwhile. Empty: none.
  void onDiskCopy(std::function<void()> hook) { on_disk_copy_ = std::move(hook); }

  // Inspection.
  size_t started() const { return started_; }  // start() calls that succeeded
  // Agents alive: running, stopped or released (not yet reaped).
  size_t live() const;
  std::vector<pid_t> pids() const;

 private:
  friend class FakeVm;
  struct Released;
  FakeOptions opts_;
  std::shared_ptr<FakeShared> shared_;
  std::map<pid_t, FakeVm*> vms_;                               // live Vm objects
  std::map<std::string, std::unique_ptr<Released>> released_;  // run_dir -> VM let go
  size_t started_ = 0;
  std::function<void()> on_disk_copy_;
  // Declared last: destroyed (joined) first, while what copies use exists.
  std::unique_ptr<boost::asio::thread_pool> disk_thread_ =
      std::make_unique<boost::asio::thread_pool>(1);
};

}  // namespace vessel::hypervisor::testing
