#include "hypervisor/hypervisor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace vessel::hypervisor {

std::string_view accelName(Accel a) { return a == Accel::kKvm ? "kvm" : "tcg"; }

namespace {

uint64_t hostMemoryMib() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (f >> key >> kib) {
    if (key == "MemTotal:") return kib / 1024;
    f.ignore(1 << 10, '\n');
  }
  return 0;
}

Status readableFile(const std::string& what, const std::string& path) {
  if (path.empty()) return Error(Code::kInvalidArgument, what + ": no path given");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error::fromErrno(what + " " + path);
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
    return Error(Code::kInvalidArgument, what + " " + path + " is not a file");
  if (::access(path.c_str(), R_OK) != 0) return Error::fromErrno(what + " " + path);
  return okStatus();
}

}  // namespace

Status validateSpec(const MachineSpec& s) {
  std::string ctx = "machine " + s.id;
  if (s.id.empty() || s.id.size() > 64)
    return Error(Code::kInvalidArgument, "machine id must be 1 to 64 characters");
  for (char c : s.id)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      return Error(Code::kInvalidArgument, ctx + ": id may hold only letters, digits, - and _");
  if (s.vcpus == 0 || s.vcpus > 64)
    return Error(Code::kInvalidArgument,
                 ctx + ": vcpus must be between 1 and 64, not " + std::to_string(s.vcpus));
  if (s.memory_mib < 16)
    return Error(Code::kInvalidArgument,
                 ctx + ": memory must be at least 16 MiB, not " + std::to_string(s.memory_mib));
  uint64_t host = hostMemoryMib();
  if (host != 0 && s.memory_mib > host)
    return Error(Code::kInvalidArgument, ctx + ": memory of " + std::to_string(s.memory_mib) +
                                             " MiB exceeds the host's " + std::to_string(host) +
                                             " MiB");
  VESSEL_TRY_CTX(readableFile("kernel", s.kernel), ctx);
  for (const Disk& d : s.disks) {
    VESSEL_TRY_CTX(readableFile("disk", d.path), ctx);
    if (d.format != "raw" && d.format != "qcow2")
      return Error(Code::kInvalidArgument, ctx + ": disk format must be raw or qcow2");
  }
  if (s.run_dir.empty() || s.run_dir[0] != '/')
    return Error(Code::kInvalidArgument, ctx + ": run_dir must be an absolute path");
  // sockaddr_un holds 108 bytes; the longest socket name we add is 12.
  if (s.run_dir.size() > 90)
    return Error(Code::kInvalidArgument, ctx + ": run_dir path is too long for unix sockets");
  if (s.console_log.empty()) return Error(Code::kInvalidArgument, ctx + ": console_log not set");
  // QEMU appends the virtio_mmio.device= parameters after the spec's
  // cmdline; behind a "--" they would go to init and the guest would
  // find no devices.
  if (s.cmdline == "--" || s.cmdline.rfind("-- ", 0) == 0 ||
      s.cmdline.find(" --") != std::string::npos)
    return Error(Code::kInvalidArgument, ctx + ": cmdline may not contain \"--\"");
  if (s.cmdline.find('\n') != std::string::npos)
    return Error(Code::kInvalidArgument, ctx + ": cmdline contains a newline");
  return okStatus();
}

}  // namespace vessel::hypervisor
