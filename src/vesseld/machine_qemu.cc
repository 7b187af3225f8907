// The production machine: QEMU, jailed (docs/threat-model.md).
#include <unistd.h>

#include <filesystem>

#include "base/log.h"
#include "base/run_blocking.h"
#include "base/sha256.h"
#include "hypervisor/qemu/qemu.h"
#include "node/accel.h"
#include "node/template_builder.h"
#include "os/jail.h"
#include "vesseld/machine.h"

namespace vessel::vesseld {

namespace fs = std::filesystem;

namespace {

// The jail's LD_PRELOAD library (memfile_shim.c): next to vesseld in the
// build tree, <prefix>/lib/vessel/ when installed (docs/operations.md,
// "Layout": a shared object does not belong in bin/).
std::string memfileShim() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (auto p : {self.parent_path() / "vessel-memfile-shim.so",
                 self.parent_path().parent_path() / "lib/vessel/vessel-memfile-shim.so"})
    if (fs::exists(p, ec)) return p.string();
  return "";
}

// How each QEMU is confined; unset with --no-jail.
Result<std::optional<hypervisor::qemu::JailOptions>> jailOptions(const NodeSettings& s) {
  if (!s.jail) return std::optional<hypervisor::qemu::JailOptions>();
  if (::geteuid() != 0)
    return Error(Code::kFailedPrecondition,
                 "the VM jail needs root (uids, mounts, cgroups); run as root or pass --no-jail");
  auto range = os::parseUidRange(s.vm_uid_range);
  if (!range.ok()) return std::move(range).error().withContext("--vm-uid-range");
  VESSEL_ASSIGN_OR_RETURN(auto uids, os::UidPool::open(*range, s.uid_lease_dir, s.state_dir));
  VESSEL_ASSIGN_OR_RETURN(auto cgroups, os::detectCgroups());
  hypervisor::qemu::JailOptions jo;
  jo.jailer = {uids, cgroups, s.state_dir + "/jail", s.slot_prefix + "-"};
  jo.memfile_shim = memfileShim();
  if (jo.memfile_shim.empty())
    return Error(Code::kFailedPrecondition,
                 "vessel-memfile-shim.so is neither next to vesseld nor in <prefix>/lib/vessel");
  jo.memory_overhead_mib = s.vm_memory_overhead_mib;
  // Templates and images: the only files a qcow2 overlay may be backed by.
  jo.backing_roots = {s.cache_dir};
  std::error_code ec;
  fs::create_directories(jo.jailer.jail_root, ec);
  ::chmod(jo.jailer.jail_root.c_str(), 0700);
  return std::optional<hypervisor::qemu::JailOptions>(std::move(jo));
}

}  // namespace

Result<Machine> qemuMachine(boost::asio::io_context& io, const NodeSettings& s) {
  Logger log("vesseld");
  Machine m;
  m.name = "qemu";
  VESSEL_ASSIGN_OR_RETURN(m.version, hypervisor::qemu::qemuVersion(s.qemu_binary));
  VESSEL_ASSIGN_OR_RETURN(auto jail, jailOptions(s));
  hypervisor::qemu::QemuOptions opts{s.qemu_binary, jail};
  auto qemu = std::make_unique<hypervisor::qemu::QemuHypervisor>(opts);
  m.sweep = [q = qemu.get()] { q->sweepJails(); };
  m.hv = std::move(qemu);
  // Build VMs run tenant code: jailed like every other VM.
  m.build_hv = [opts] { return std::make_unique<hypervisor::qemu::QemuHypervisor>(opts); };
  m.jailed = jail.has_value();
  if (jail)
    log.info("VM jail: uids {}, cgroup {} ({}), QEMU memory overhead {} MiB", s.vm_uid_range,
             jail->jailer.cgroups.fs_root + "/.../" + jail->jailer.cgroups.parent,
             jail->jailer.cgroups.unified ? "v2" : "v1", jail->memory_overhead_mib);
  else
    log.warn("VM jail disabled (--no-jail): QEMU runs as vesseld's own user");

  std::error_code ec;
  fs::create_directories(s.run_root, ec);
  // A probe left over from a crashed start must not block this one.
  fs::remove_all(s.run_root + "/accel-probe", ec);
  node::ProbeInputs probe{
      s.kernel,    s.minimal_image, "init=/sbin/vessel-agent", s.run_root + "/accel-probe",
      s.cache_dir, m.version};
  auto accel = runBlocking(io, node::chooseAccel(s.accel, *m.hv, probe));
  if (!accel.ok()) return std::move(accel).error();
  m.accel = accel->accel;
  m.accel_reason = accel->reason;
  log.info("hypervisor qemu ({}), acceleration {}: {}", m.version, hypervisor::accelName(m.accel),
           m.accel_reason);
  if (m.accel != hypervisor::Accel::kKvm) {
    if (s.require_kvm)
      return Error(Code::kFailedPrecondition, "--require-kvm: KVM is not usable (" +
                                                  m.accel_reason +
                                                  "); refusing to run sandboxes under TCG");
    log.warn(
        "sandboxes run under TCG: QEMU's emulator is not an isolation boundary; do not run "
        "untrusted code on this node in production (--require-kvm enforces KVM)");
  }
  VESSEL_ASSIGN_OR_RETURN(m.kernel_sha, sha256File(s.kernel));
  node::BuildInputs in{s.minimal_image, s.kernel, m.kernel_sha,
                       m.version,       m.accel,  s.run_root + "/template-build"};
  m.install_minimal = [in, hv = m.hv.get()](boost::asio::io_context& io,
                                            templates::TemplateStore& templates) -> Status {
    templates::BuildSpec spec;
    spec.name = "minimal";
    std::error_code ec;
    fs::remove_all(in.work_dir, ec);
    fs::create_directories(in.work_dir, ec);
    auto built = runBlocking(io, node::buildTemplate(*hv, templates, spec, in));
    if (!built.ok()) return std::move(built).error().withContext("build template minimal");
    Logger("vesseld").info("template {} ready", (*built)->id());
    return okStatus();
  };
  return m;
}

}  // namespace vessel::vesseld
