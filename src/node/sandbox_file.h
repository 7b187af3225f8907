#pragma once
// <runtime>/sandboxes/<id>/sandbox.json: what the node keeps on disk of a
// sandbox, so that a later vesseld can resume it (paused) or take its VM
// over (running, with its network slot). A typed codec: the only place
// that reads or writes the file's JSON. Decoding is strict (a record with
// a missing or mistyped field is corrupt, not half-read) and bounded.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "node/guest_network.h"

namespace vessel::node {

struct SandboxFile {
  std::string id;
  std::string template_id;  // name@version
  std::string vm_dir;
  std::string hostname;
  std::vector<std::string> env;
  GuestNetwork network;
  // The slot whose tap its VM holds (a running VM with egress).
  std::optional<uint32_t> network_slot;
  unsigned vcpus = 1;
  uint64_t memory_mib = 256;
  // The root disk's size as the guest sees it (0: a record from before
  // disks were sized: the template's own).
  uint64_t disk_mib = 0;
  bool paused = false;
  // Paused without its memory (state "paused-disk"): only the disk was
  // kept, and a resume boots the template's kernel on it.
  bool disk_only = false;
  // The guest pid of its template's start command in its memory (restored
  // from the template's snapshot, and so its pauses and forks); 0 when its
  // memory began with a boot (a cold create, a disk-only resume) or none.
  uint32_t start_pid = 0;
  // A running VM: its QEMU's pid and start time (field 22 of /proc/pid/stat),
  // which together name it even after the pid is recycled.
  pid_t vm_pid = 0;
  uint64_t vm_start_ticks = 0;
  bool operator==(const SandboxFile&) const = default;
};

std::string encodeSandboxFile(const SandboxFile& f);
// kInternal "sandbox.json is corrupt: ..." for anything but a record
// encodeSandboxFile could have written (at most 1 MiB).
Result<SandboxFile> decodeSandboxFile(std::string_view json);

}  // namespace vessel::node
