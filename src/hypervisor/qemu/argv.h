#pragma once
// Turns a MachineSpec into a QEMU `microvm` command line. Pure: no I/O, so
// every flag is unit-tested. Only virtio-mmio devices; QEMU appends their
// virtio_mmio.device= parameters to the kernel command line (acpi=off).
#include <string>
#include <vector>

#include "hypervisor/hypervisor.h"

namespace vessel::hypervisor::qemu {

struct QemuPaths {
  std::string binary = "qemu-system-x86_64";
  std::string qmp_socket;
  std::string console_socket;
  std::string agent_socket;
};

// The fd number QEMU finds the tap on, when the spec has one.
constexpr int kTapChildFd = 3;
// The fd number QEMU reads an incoming migration (restore) from.
constexpr int kStateChildFd = 4;
// The virtio-serial port name the agent looks for in /sys/class/virtio-ports.
constexpr const char* kAgentPortName = "vessel.agent";

// Kernel parameters every guest gets before the spec's own.
std::string baseCmdline(const MachineSpec& spec);

std::vector<std::string> buildArgv(const MachineSpec& spec, const QemuPaths& paths);

}  // namespace vessel::hypervisor::qemu
