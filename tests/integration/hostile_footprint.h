#pragma once
// What one sandbox holds on the host (tests/integration/hostile_test.cc):
// its QEMU, that QEMU's cgroups, jail directory and uid lease, its network
// slot's namespace, its VM and sandbox directories. Taken while it runs;
// expectGone() checks that every piece went with the sandbox.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vesseld_harness.h"

namespace vessel::testing {

struct Footprint {
  std::string id;
  pid_t qemu = 0;
  std::string sandbox_dir, vm_dir, netns, jail_dir, lease;
  std::vector<std::string> cgroups;  // host paths of the QEMU's cgroup directories
  std::string memory_cgroup;         // the one with the memory controller ("" if none)
  // True once every piece above was found (the test asserts it).
  bool complete() const;
  std::string describe() const;
};

// The footprint of running sandbox `id` of daemon `d`.
Footprint footprintOf(const Vesseld& d, const std::string& id);
// Fails the calling test for every piece of `f` still on the host.
void expectGone(const Footprint& f);

// Bytes the files under `dir` occupy on their disks (st_blocks), recursively.
uint64_t allocatedUnder(const std::string& dir);
// The daemon's resident memory, KiB (VmRSS); 0 if it cannot be read.
uint64_t rssKib(pid_t pid);
// How many times the kernel OOM-killed inside the QEMU's memory cgroup
// (v1 memory.oom_control or v2 memory.events); -1 if unreadable.
int64_t hostOomKills(const std::string& memory_cgroup);

}  // namespace vessel::testing
