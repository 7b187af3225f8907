#pragma once
// What a QEMU needs inside its jail (os/jail.h) for one MachineSpec: the
// system's /usr (QEMU is dynamically linked and reads its firmware there),
// /dev/null, /dev/urandom (and, under KVM, a /dev/kvm node of its own uid),
// the kernel, the disks and their qcow2 backing files, the memory file and
// the socket directory; and its cgroup's limits.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hypervisor/hypervisor.h"
#include "os/jail.h"

namespace vessel::hypervisor::qemu {

struct JailOptions {
  os::JailerConfig jailer;
  // LD_PRELOAD library that lets a jailed QEMU map a template's memory file
  // copy-on-write from a read-only fd (memfile_shim.c).
  std::string memfile_shim;
  // Added to guest RAM for the cgroup's memory limit: QEMU's own heap,
  // TCG's translation cache, page tables (measured; see docs/threat-model.md).
  uint64_t memory_overhead_mib = 256;
  // Where a qcow2 overlay's backing file (Disk::backing) may be: anything
  // else is refused. Which file is the spec's to say (exactly its template's
  // image), never the overlay header's: see checkDiskHeaders.
  std::vector<std::string> backing_roots;
  // I/O of each VM on the devices holding its files: a weight equal to
  // an ordinary process's (a VM cannot starve vesseld or its neighbours of
  // disk time) and caps that one VM's disk cannot exceed.
  uint32_t io_weight = 100;
  uint64_t io_bps = 256ull << 20;  // each way
  uint64_t io_iops = 8000;         // each way
};

// The fd a jailed QEMU finds a template's memory file on (read-only).
constexpr int kMemFileChildFd = 5;

// Each qcow2 disk's header names exactly its Disk::backing (and format),
// or nothing when that is empty, and nothing else QEMU would open (data
// file, protocol, encryption; qcow2_header.h). Before every start.
Status checkDiskHeaders(const MachineSpec& spec);

// What any binary run in a jail needs: /usr (the binary, its libraries),
// the /lib symlinks, `binary` itself if elsewhere, /dev/null, /dev/urandom.
void addSystemMounts(os::JailSpec& j, const std::string& binary);

// The jail for `spec`; `binary` is QEMU's resolved path.
Result<os::JailSpec> jailSpecFor(const MachineSpec& spec, const JailOptions& opts,
                                 const std::string& binary);

// QEMU's environment inside the jail: nothing of vesseld's own.
std::vector<std::string> jailedEnv(const MachineSpec& spec, const JailOptions& opts);

// Resolves a binary name through PATH, as exec would.
std::string resolveBinary(const std::string& name);

}  // namespace vessel::hypervisor::qemu
