#pragma once
// Shared by the integration tests that boot real guests: where the kernel
// and template images are (exported by `make test`), scratch directories,
// and the leak check every test ends with.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hypervisor/hypervisor.h"

namespace vessel::testing {

// Paths from VESSEL_KERNEL and VESSEL_MINIMAL_IMAGE. A missing variable
// fails the calling test: `make test` always sets them, and a guest test
// that silently skips proves nothing.
std::string kernelPath();
std::string minimalImage();

// A fresh scratch directory under /tmp, removed by the caller's ScratchDir.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  const std::string& path() const { return path_; }
  // Every file left under the directory (recursively), relative names.
  std::vector<std::string> files() const;

 private:
  std::string path_;
};

// A spec that boots the minimal template's agent under TCG.
hypervisor::MachineSpec minimalSpec(const std::string& id, const ScratchDir& dir);

// Pids of live processes whose command line names QEMU machine `vessel-<id>`
// for any id starting with `prefix`.
std::vector<int> qemuProcessesFor(const std::string& prefix);
// QEMU processes whose command line mentions `path` (a test's own scratch
// or state directory): unlike a name prefix, this does not see the VMs of
// tests running at the same time (ctest -j).
std::vector<int> qemuProcessesUsing(const std::string& path);

// A loopback TCP port nothing listens on right now (bound, then closed).
uint16_t freePort();

}  // namespace vessel::testing
