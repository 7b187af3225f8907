#pragma once
// The Hypervisor interface: what the node runtime needs from a VMM, and
// nothing about how a particular VMM is driven. A backend turns a typed
// MachineSpec into a running machine whose agent channel is a connected byte
// stream; readiness of the guest (the agent's Hello) is decided above this
// layer, by node::bootMachine.
#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/child_process.h"
#include "base/result.h"

namespace vessel::hypervisor {

namespace asio = boost::asio;
using Socket = asio::local::stream_protocol::socket;
using Clock = std::chrono::steady_clock;

enum class Accel { kKvm, kTcg };
std::string_view accelName(Accel a);

struct Disk {
  std::string path;
  bool read_only = true;
  std::string format = "raw";  // raw | qcow2
  // qcow2: the one file it may be backed by, byte for byte as its header
  // must name it (the template's image), and that file's format; empty: no
  // backing at all. A guest that takes over its VMM can rewrite the header
  // of its writable overlay; a backend refuses to open a disk whose header
  // names anything else, and opens only this file as its backing.
  std::string backing;
  std::string backing_format = "raw";
};

struct MachineSpec {
  std::string id;  // names the VM in logs and errors (e.g. the sandbox id)
  unsigned vcpus = 1;
  uint64_t memory_mib = 256;
  Accel accel = Accel::kTcg;
  std::string kernel;       // uncompressed vmlinux with a PVH note
  std::string cmdline;      // appended to the backend's base command line
  std::vector<Disk> disks;  // first one is /dev/vda
  // An open tap fd (in whatever netns it was created); the backend passes it
  // to the VMM. Unset: the machine has no network device.
  std::optional<int> tap_fd;
  // A virtio-net device even without a tap (then connected to nothing): a
  // snapshot keeps its device set, so every VM restored from a template
  // needs the NIC the template was built with, network or not.
  bool network_device = false;
  std::string guest_mac = "06:00:ac:10:00:02";
  // Directory for the VMM's sockets; created by start(), removed by stop().
  std::string run_dir;
  // Guest console output goes here, truncated at console_log_max_bytes:
  // a guest may print without end and must not fill the host's disk.
  std::string console_log;
  uint64_t console_log_max_bytes = 1 << 20;
  // Guest RAM in a file-backed memory backend (snapshot templates); empty:
  // anonymous memory. share=true writes through to the file (template
  // builds); share=false maps it copy-on-write (clones).
  std::string memory_file;
  bool memory_shared = false;
  // Start without running, waiting for an incoming migration (restore);
  // the state is read from this fd (an open state file) by loadState().
  bool incoming = false;
  std::optional<int> incoming_state_fd;
};

// Checks a spec before anything is spawned: vCPUs and memory in range (not 0,
// not above the host's), kernel and disks exist and are readable, paths set.
Status validateSpec(const MachineSpec& spec);

class Vm {
 public:
  virtual ~Vm() = default;
  virtual const std::string& id() const = 0;
  virtual pid_t pid() const = 0;
  // The agent channel, connected before the guest ran its first instruction,
  // so no byte the guest sends is lost. Owned by the Vm; valid until stop().
  virtual Socket& agentChannel() = 0;
  // Completes when the VMM process has exited, with how it ended.
  virtual asio::awaitable<ExitStatus> waitExit() = 0;
  // Types into the guest's console (hvc0), for debugging.
  virtual Status writeConsole(std::string_view bytes) = 0;
  // The VMM's stderr and the console log's tail, for error messages.
  virtual std::string diagnostics() const = 0;
  // Stops / restarts the vCPUs (the VMM process stays).
  virtual asio::awaitable<Status> pauseVcpus() = 0;
  virtual asio::awaitable<Status> resumeVcpus() = 0;
  // Writes the device state to `path`, and guest RAM too unless
  // `ignore_shared` and RAM lives in a shared memory file (templates). The
  // vCPUs must be paused. The file is fsynced before this returns.
  virtual asio::awaitable<Status> saveState(const std::string& path, bool ignore_shared) = 0;
  // For a machine started with `incoming`: loads the state from
  // incoming_state_fd. The vCPUs stay paused; resumeVcpus() runs the guest.
  virtual asio::awaitable<Status> loadState(bool ignore_shared) = 0;
  // Grows disk `index` (spec.disks order) to `bytes` while the guest runs:
  // the image's virtual size changes and the guest's block device is told
  // (virtio config change). Never shrinks; the same size is a no-op.
  virtual asio::awaitable<Status> resizeDisk(size_t index, uint64_t bytes) {
    co_return Error(Code::kUnavailable, "this VMM cannot resize disks");
  }
  // Graceful quit, then SIGTERM, then SIGKILL; reaps and removes run_dir.
  virtual asio::awaitable<Status> stop() = 0;
  // Kills the VMM at once (SIGKILL), without waiting: every call on its
  // channels fails promptly. stop() still reaps and cleans up afterwards.
  virtual void kill() {}
  // Lets go of the machine without stopping it: channels are closed, the
  // VMM keeps running for a later process to adopt. Nothing else works after.
  virtual void release() {}
};

class Hypervisor {
 public:
  virtual ~Hypervisor() = default;
  virtual std::string_view name() const = 0;
  // Spawns the VMM, connects its control and agent channels and lets the
  // guest run. Fails with a clear Error (and leaves nothing behind) on bad
  // input, a VMM that exits, or the deadline passing.
  virtual asio::awaitable<Result<std::unique_ptr<Vm>>> start(MachineSpec spec,
                                                             Clock::time_point deadline) = 0;
  // Takes over a machine an earlier process started and left running (a
  // vesseld restart): `pid` (with its start time, see processStartTicks)
  // must still be the VMM serving spec.run_dir. Control, console and agent
  // channels are reconnected; the guest's state is not touched.
  virtual asio::awaitable<Result<std::unique_ptr<Vm>>> adopt(MachineSpec spec, pid_t pid,
                                                             uint64_t start_ticks,
                                                             Clock::time_point deadline) {
    co_return Error(Code::kUnavailable, std::string(name()) + " cannot adopt machines");
  }
  // Stops a VMM still serving `run_dir` that nobody owns any more (left by
  // a process that died mid-start); nothing to do if none is there.
  virtual asio::awaitable<Status> stopOrphan(std::string run_dir) { co_return okStatus(); }

  // Disk images, made the way this VMM reads them (QEMU: qcow2 overlays;
  // another VMM would use reflinks or device-mapper snapshots). None of
  // these blocks the caller's thread: the copying runs in a child process.
  // A writable disk at `path` whose unwritten blocks read from `backing`
  // (of `backing_format`): nothing is copied, nothing is written to it.
  virtual asio::awaitable<Status> createOverlay(std::string path, std::string backing,
                                                std::string backing_format) {
    co_return Error(Code::kUnavailable, std::string(name()) + " cannot make disks");
  }
  // A private copy of a writable disk (a fork's), sparse where it was.
  virtual asio::awaitable<Status> copyDisk(std::string from, std::string to) {
    co_return Error(Code::kUnavailable, std::string(name()) + " cannot copy disks");
  }
  // `overlay` and what it is backed by (overlay.backing, the only backing
  // it may have), flattened into one raw image at `to` (a sandbox's disk
  // becoming a template's base), at most `max_bytes` large (0: any). The
  // overlay is a copy a VM once wrote: a backend checks it as start() does.
  virtual asio::awaitable<Status> flattenDisk(Disk overlay, std::string to, uint64_t max_bytes) {
    co_return Error(Code::kUnavailable, std::string(name()) + " cannot flatten disks");
  }
};

}  // namespace vessel::hypervisor
