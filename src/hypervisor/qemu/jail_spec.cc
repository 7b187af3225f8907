#include "hypervisor/qemu/jail_spec.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "base/fd.h"
#include "hypervisor/qemu/qcow2_header.h"

namespace vessel::hypervisor::qemu {

namespace fs = std::filesystem;

namespace {

bool under(const std::string& path, const std::string& root) {
  return !root.empty() && path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
         path[root.size()] == '/';
}

}  // namespace

Status checkDiskHeaders(const MachineSpec& spec) {
  for (const Disk& d : spec.disks) {
    if (d.format == "raw") continue;
    if (d.format != "qcow2")
      return Error(Code::kInvalidArgument, "disk " + d.path + ": format '" + d.format + "'");
    // A raw backing file has no header for QEMU to follow further; a
    // qcow2 one would be a chain, and no template's image is.
    if (!d.backing.empty() && d.backing_format != "raw")
      return Error(Code::kInvalidArgument,
                   "disk " + d.path + ": backing format '" + d.backing_format + "'");
    VESSEL_TRY_CTX(checkQcow2Overlay(d.path, d.backing, d.backing_format), "machine " + spec.id);
  }
  return okStatus();
}

void addSystemMounts(os::JailSpec& j, const std::string& binary) {
  // The system: the binary, its libraries and firmware. /lib and /lib64
  // are symlinks into /usr on merged-/usr systems (Debian 12), else mounted.
  j.mounts.push_back({"/usr", false, false, true});
  for (const char* top : {"/lib", "/lib64", "/bin"}) {
    std::error_code ec;
    auto st = fs::symlink_status(top, ec);
    if (ec) continue;
    if (fs::is_symlink(st))
      j.symlinks.push_back({top, fs::read_symlink(top, ec).string()});
    else if (fs::is_directory(st))
      j.mounts.push_back({top, false, false, true});
  }
  std::string real_binary = fs::weakly_canonical(binary).string();
  if (!under(real_binary, "/usr")) j.mounts.push_back({real_binary, false, false, true});
  j.mounts.push_back({"/dev/null", true, true, false});
  j.mounts.push_back({"/dev/urandom", false, true, false});
}

std::string resolveBinary(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string cand = dirs.substr(start, end - start) + "/" + name;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return name;
}

Result<os::JailSpec> jailSpecFor(const MachineSpec& spec, const JailOptions& opts,
                                 const std::string& binary) {
  const std::string ctx = "jail for " + spec.id;
  os::JailSpec j;
  j.id = spec.id;
  addSystemMounts(j, binary);
  // Its own node, owned by its uid: the host's is root:kvm 0660 (or
  // root-only), and the VM is in no host group.
  if (spec.accel == Accel::kKvm) j.devices.push_back({"/dev/kvm"});

  j.mounts.push_back({spec.kernel, false, false, false});
  for (const Disk& d : spec.disks) {
    j.mounts.push_back({d.path, !d.read_only, false, false});
    if (!d.read_only) j.owned.push_back(d.path);
    if (d.format != "qcow2" || d.backing.empty()) continue;
    // The one file the spec names (the template's image; start() checked
    // that the header names it and nothing else), never a name read from
    // the header: a QEMU that rewrote it must not be lent another file.
    bool allowed = false;
    for (const auto& root : opts.backing_roots) allowed = allowed || under(d.backing, root);
    if (!allowed)
      return Error(Code::kFailedPrecondition, ctx + ": backing file " + d.backing + " of " +
                                                  d.path + " is outside the image roots");
    j.mounts.push_back({d.backing, false, false, false});
  }
  if (!spec.memory_file.empty()) {
    // Shared (a template build): this VM's own file, written through.
    // Private (a clone): the template's file, read-only for every clone;
    // the shim hands QEMU a read-only fd it maps copy-on-write.
    j.mounts.push_back({spec.memory_file, spec.memory_shared, false, false});
    if (spec.memory_shared) {
      j.owned.push_back(spec.memory_file);
    } else {
      if (opts.memfile_shim.empty())
        return Error(Code::kFailedPrecondition, ctx + ": no memory-file shim configured");
      j.mounts.push_back({opts.memfile_shim, false, false, true});
    }
  }
  j.mounts.push_back({spec.run_dir, true, false, false});
  j.owned.push_back(spec.run_dir);

  const uint64_t mib = 1ull << 20;
  j.limits.memory_bytes = (spec.memory_mib + opts.memory_overhead_mib) * mib;
  // One CPU per vCPU plus one for QEMU's main loop and I/O.
  j.limits.cpu_quota_us = (uint64_t{spec.vcpus} + 1) * 100000;
  // vCPU threads, the main loop, RCU, and QEMU's worker pool (up to 64).
  j.limits.pids = 128 + spec.vcpus;
  j.limits.io_weight = opts.io_weight;
  // Every device a file of the VM lives on (its disks, their backing
  // files, its memory file): usually one.
  std::set<std::pair<uint32_t, uint32_t>> devs;
  for (const auto& m : j.mounts) {
    if (m.device || m.exec) continue;  // /dev nodes, the system's /usr
    // A file that is not there yet fails the jail's own plan, with its name.
    auto d = os::blockDeviceOf(m.path);
    if (d.ok() && *d) devs.insert(**d);
  }
  for (const auto& [major, minor] : devs)
    j.limits.io_max.push_back({major, minor, opts.io_bps, opts.io_bps, opts.io_iops, opts.io_iops});
  return j;
}

std::vector<std::string> jailedEnv(const MachineSpec& spec, const JailOptions& opts) {
  std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
  if (!spec.memory_file.empty() && !spec.memory_shared) {
    env.push_back("LD_PRELOAD=" + opts.memfile_shim);
    env.push_back("VESSEL_MEMFILE=" + spec.memory_file);
    env.push_back("VESSEL_MEMFILE_FD=" + std::to_string(kMemFileChildFd));
  }
  return env;
}

}  // namespace vessel::hypervisor::qemu
