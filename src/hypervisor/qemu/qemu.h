#pragma once
// The QEMU backend: Debian's qemu-system-x86_64 with machine `microvm`,
// driven over QMP. One QEMU process per machine, confined by QEMU's own
// seccomp sandbox and, when QemuOptions::jail is set, by a jail of its own
// (jail_spec.h, os/jail.h); its sockets live in the machine's run_dir.
#include <boost/asio/thread_pool.hpp>
#include <memory>
#include <optional>
#include <string>

#include "hypervisor/hypervisor.h"
#include "hypervisor/qemu/jail_spec.h"

namespace vessel::hypervisor::qemu {

struct QemuOptions {
  std::string binary = "qemu-system-x86_64";
  // Unset: QEMU runs as the caller (tests of QEMU itself, unprivileged use).
  std::optional<JailOptions> jail;
};

class QemuHypervisor : public Hypervisor {
 public:
  explicit QemuHypervisor(QemuOptions opts)
      : opts_(std::move(opts)), disk_(std::make_shared<boost::asio::thread_pool>(1)) {}
  std::string_view name() const override { return "qemu"; }
  asio::awaitable<Result<std::unique_ptr<Vm>>> start(MachineSpec spec,
                                                     Clock::time_point deadline) override;
  asio::awaitable<Result<std::unique_ptr<Vm>>> adopt(MachineSpec spec, pid_t pid,
                                                     uint64_t start_ticks,
                                                     Clock::time_point deadline) override;
  asio::awaitable<Status> stopOrphan(std::string run_dir) override;
  // qemu-img and cp as children, waited on through their pidfds (disk.cc).
  asio::awaitable<Status> createOverlay(std::string path, std::string backing,
                                        std::string backing_format) override;
  asio::awaitable<Status> copyDisk(std::string from, std::string to) override;
  asio::awaitable<Status> flattenDisk(Disk overlay, std::string to, uint64_t max_bytes) override;
  bool jailed() const { return opts_.jail.has_value(); }
  // Removes what VMs that died unwatched left of their jails (empty
  // cgroups, mount-point directories, uid leases). After adopting.
  void sweepJails();

  // Runs a tool (qemu-img) on images a VM wrote, confined as a VM is: a
  // uid of its own leased from the VM range, no capabilities,
  // no_new_privs, a mount view of the system and `files` alone, a cgroup,
  // no network, IPC or PID namespace of the host's (it is PID 1 of its
  // own, Jail::spawn). `owned` are lent to its uid
  // for the run (os::JailSpec::owned). Without a jail configured the tool
  // runs as QEMU then does, as vesseld.
  asio::awaitable<Status> runConfined(std::vector<std::string> argv,
                                      std::vector<os::BindMount> files,
                                      std::vector<std::string> owned,
                                      std::chrono::milliseconds limit, std::string what);

 private:
  QemuOptions opts_;
  // Writes and fsyncs of saved VM states (guest RAM, hundreds of MiB): a
  // writer the page cache throttles must not be the io thread. Shared with
  // the Vms, which may outlive this.
  std::shared_ptr<boost::asio::thread_pool> disk_;
};

// The most a VM's saved state may be (bytes): its RAM, an eighth more for
// page headers and device state, and 64 MiB. A longer stream is refused.
inline uint64_t stateStreamCap(uint64_t memory_mib) {
  return (memory_mib + memory_mib / 8 + 64) << 20;
}

// QEMU's version line ("QEMU emulator version 7.2.22 ..."), for manifests,
// health output and the acceleration probe's cache key.
Result<std::string> qemuVersion(const std::string& binary);

}  // namespace vessel::hypervisor::qemu
