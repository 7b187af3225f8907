#include "hypervisor/qemu/argv.h"

#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace vessel::hypervisor::qemu {

namespace {
// The host's TSC rate, kHz, measured once against CLOCK_MONOTONIC_RAW over
// 100 ms (0 where there is no TSC).
uint64_t hostTscKhz() {
#if defined(__x86_64__)
  static const uint64_t khz = [] {
    auto now = [] {
      timespec t{};
      ::clock_gettime(CLOCK_MONOTONIC_RAW, &t);
      return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
    };
    uint64_t n0 = now(), c0 = __rdtsc();
    timespec d{0, 100 * 1000 * 1000};
    ::nanosleep(&d, nullptr);
    uint64_t n1 = now(), c1 = __rdtsc();
    return n1 > n0 ? (c1 - c0) * 1000000u / (n1 - n0) : 0;
  }();
  return khz;
#else
  return 0;
#endif
}
}  // namespace

std::string baseCmdline(const MachineSpec& spec) {
  // hvc0: the virtconsole below. panic=-1 with -no-reboot turns a guest
  // kernel panic into a QEMU exit, seen at once instead of as a boot timeout.
  std::string c = "console=hvc0 panic=-1 reboot=t";
  // Under TCG the guest's TSC is the host's, but the guest cannot measure
  // its rate (no HPET or PM timer on microvm, and the PIT calibration fails
  // under emulation): it falls back to the jiffies clocksource, which
  // keeps a periodic 250 Hz tick even on an idle vCPU, a few percent of a
  // host core per idle sandbox. Told the rate, it keeps time with the TSC
  // and stops ticking when idle (NO_HZ_IDLE).
  if (spec.accel == Accel::kTcg)
    if (uint64_t khz = hostTscKhz(); khz > 0)
      c += " tsc_early_khz=" + std::to_string(khz) + " tsc=reliable";
  if (!spec.disks.empty()) {
    c += " root=/dev/vda rootfstype=ext4";
    c += spec.disks.front().read_only ? " ro" : " rw";
  }
  return c;
}

std::vector<std::string> buildArgv(const MachineSpec& s, const QemuPaths& p) {
  std::vector<std::string> a = {p.binary, "-name", "vessel-" + s.id};
  // Guest RAM is always the backend "mem", file-backed or not: a snapshot
  // names its RAM block by that id, so every machine must use the same one
  // for any state to load into any machine of the same shape.
  std::string machine =
      "microvm,x-option-roms=off,isa-serial=off,rtc=on,acpi=off,memory-backend=mem";
  a.insert(a.end(),
           {"-M", machine, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"});
  if (s.accel == Accel::kKvm)
    a.insert(a.end(), {"-accel", "kvm", "-cpu", "host"});
  else
    a.insert(a.end(), {"-accel", "tcg", "-cpu", "max"});
  a.insert(a.end(), {"-smp", std::to_string(s.vcpus), "-m", std::to_string(s.memory_mib) + "M"});
  std::string size = std::to_string(s.memory_mib) + "M";
  if (!s.memory_file.empty()) {
    a.insert(a.end(),
             {"-object", "memory-backend-file,id=mem,size=" + size + ",mem-path=" + s.memory_file +
                             ",share=" + (s.memory_shared ? "on" : "off")});
  } else {
    a.insert(a.end(), {"-object", "memory-backend-ram,id=mem,size=" + size});
  }
  std::string cmdline = baseCmdline(s);
  if (!s.cmdline.empty()) cmdline += " " + s.cmdline;
  a.insert(a.end(), {"-kernel", s.kernel, "-append", cmdline});
  // Started paused: the host connects console and agent channel before the
  // guest runs its first instruction, so no early output is lost.
  a.insert(a.end(), {"-S", "-qmp", "unix:" + p.qmp_socket + ",server=on,wait=off"});
  a.insert(a.end(), {"-device", "virtio-serial-device,max_ports=2", "-chardev",
                     "socket,id=console,path=" + p.console_socket + ",server=on,wait=off",
                     "-device", "virtconsole,chardev=console", "-chardev",
                     "socket,id=agent,path=" + p.agent_socket + ",server=on,wait=off", "-device",
                     std::string("virtserialport,chardev=agent,name=") + kAgentPortName});
  a.insert(a.end(), {"-object", "rng-random,id=rng0,filename=/dev/urandom", "-device",
                     "virtio-rng-device,rng=rng0"});
  for (size_t i = 0; i < s.disks.size(); ++i) {
    const Disk& d = s.disks[i];
    std::string id = "disk" + std::to_string(i);
    std::string drive =
        "id=" + id + ",file=" + d.path + ",format=" + d.format + ",if=none,discard=unmap";
    if (d.format == "qcow2" && !d.backing.empty()) {
      // The backing file named here, not the one the header names: QEMU
      // never follows a name the guest's QEMU could have written (start()
      // checked the header names this file too).
      drive += ",backing.driver=" + d.backing_format + ",backing.file.driver=file" +
               ",backing.file.filename=" + d.backing;
    }
    if (d.read_only) {
      drive += ",readonly=on";
    } else {
      // A write the host cannot store (its disk is full: ENOSPC) fails in
      // the guest with EIO. QEMU's default (werror=enospc) would stop the
      // whole VM instead, leaving a sandbox that shows running and whose
      // agent no longer answers; with `report` the guest's program gets the
      // error and the sandbox keeps answering (docs/threat-model.md).
      drive += ",werror=report";
    }
    a.insert(a.end(), {"-drive", drive, "-device", "virtio-blk-device,drive=" + id});
  }
  if (s.tap_fd || s.network_device) {
    // Without a tap the NIC's backend is a hub port with no other port:
    // frames go nowhere.
    std::string netdev = s.tap_fd ? "tap,id=net0,fd=" + std::to_string(kTapChildFd)
                                  : std::string("hubport,id=net0,hubid=0");
    a.insert(a.end(),
             {"-netdev", netdev, "-device", "virtio-net-device,netdev=net0,mac=" + s.guest_mac});
  }
  if (s.incoming) a.insert(a.end(), {"-incoming", "defer"});
  // QEMU's own seccomp filter: no exec, no privilege changes, no setting
  // of scheduler or resource limits, obsolete syscalls denied.
  a.insert(a.end(),
           {"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"});
  return a;
}

}  // namespace vessel::hypervisor::qemu
