#pragma once
// One cgroup per hypervisor process, with memory, CPU and pids limits, on
// cgroup v2 or on the hybrid v1 layout (a hierarchy per controller under
// /sys/fs/cgroup/<controller>). The leaf lives under a parent of its own
// ("vessel"), not under vesseld's cgroup: a service manager that stops or
// restarts vesseld does not kill the VMs with it.
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace vessel::os {

struct CgroupConfig {
  std::string fs_root = "/sys/fs/cgroup";
  // Directory under each hierarchy that holds the VM leaves.
  std::string parent = "vessel";
  // true: one v2 hierarchy at fs_root; false: v1 hierarchies at
  // fs_root/{memory,cpu,pids} (and blkio, below).
  bool unified = false;
  // v1 only: fs_root/blkio is used for the I/O limits (detectCgroups sets
  // it when that hierarchy is there).
  bool v1_blkio = true;
};

// Reads which layout fs_root has (statfs: cgroup2 is unified; otherwise the
// v1 controllers below it are used).
Result<CgroupConfig> detectCgroups(std::string fs_root = "/sys/fs/cgroup",
                                   std::string parent = "vessel");

struct CgroupLimits {
  uint64_t memory_bytes = 0;  // 0: no limit
  // CPU time per 100 ms period in microseconds (100000 = one CPU); 0: none.
  uint64_t cpu_quota_us = 0;
  uint64_t pids = 0;  // 0: no limit
  // Proportional I/O share against other groups, 1-10000 (v2's scale; v1's
  // BFQ takes 1-1000, so it is clamped there); 0: the kernel's default.
  // Best effort: it needs a scheduler or controller (BFQ, iocost) that the
  // host may not have.
  uint32_t io_weight = 0;
  // Caps per block device (bytes and operations per second; 0: none).
  struct IoMax {
    uint32_t major = 0, minor = 0;
    uint64_t rbps = 0, wbps = 0, riops = 0, wiops = 0;
  };
  std::vector<IoMax> io_max;
};

// The whole block device a file's bytes live on (the disk, not its
// partition: the kernel throttles whole devices), or nothing for a file
// system without one (tmpfs, overlayfs).
Result<std::optional<std::pair<uint32_t, uint32_t>>> blockDeviceOf(const std::string& path);

class Cgroup {
 public:
  Cgroup() = default;
  Cgroup(Cgroup&& o) noexcept : dirs_(std::exchange(o.dirs_, {})) {}
  Cgroup& operator=(Cgroup&& o) noexcept;
  Cgroup(const Cgroup&) = delete;
  Cgroup& operator=(const Cgroup&) = delete;
  ~Cgroup() { (void)remove(); }

  // Creates the leaf `name` (must not exist) in every hierarchy and sets the
  // limits; on any error nothing is left.
  static Result<Cgroup> create(const CgroupConfig& cfg, const std::string& name,
                               const CgroupLimits& limits);
  // Takes over a leaf an earlier process made (a vesseld restart).
  static Result<Cgroup> adopt(const CgroupConfig& cfg, const std::string& name);
  static std::vector<std::string> dirsFor(const CgroupConfig& cfg, const std::string& name);

  // The leaf's directories (one per hierarchy).
  const std::vector<std::string>& dirs() const { return dirs_; }
  // cgroup.procs of each: a process writes its pid to each to join.
  std::vector<std::string> procsFiles() const;
  bool valid() const { return !dirs_.empty(); }

  // Removes the leaf; its processes must have exited. Retries for up to
  // 1 s while the kernel still counts a just-reaped process, sleeping
  // between tries: for destructors and tools...
  Status remove();
  // ... and the same for an io thread, the waits on a timer of its
  // executor. Afterwards the leaf is gone or given up (with the error).
  boost::asio::awaitable<Status> removeAsync();
  // One try, no waiting: true once every directory is gone; false while
  // some are busy (EBUSY), which are kept for the next try. Any other
  // error is returned, and that directory forgotten.
  Result<bool> tryRemove();
  void release() { dirs_.clear(); }

 private:
  explicit Cgroup(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {}
  std::vector<std::string> dirs_;
};

// Removes every leaf under cfg.parent whose name starts with `prefix` and
// that has no processes (VMs that died while no vesseld watched them).
size_t sweepCgroups(const CgroupConfig& cfg, const std::string& prefix);

}  // namespace vessel::os
