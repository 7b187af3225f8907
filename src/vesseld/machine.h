#pragma once
// What the node stack runs VMs on, by --hypervisor name: the hypervisor,
// the one template builds make on their own thread, what templates are
// keyed by (its version, the kernel's hash), the accelerator chosen, and
// how the built-in `minimal` template becomes ready. The production
// vesseld knows QEMU only (machine_qemu.cc); test binaries add the fake
// hypervisor (vesseld/testing/fake_machine.h), which never links into it.
#include <boost/asio/io_context.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/result.h"
#include "hypervisor/hypervisor.h"
#include "templates/store.h"
#include "vesseld/settings.h"

namespace vessel::vesseld {

struct Machine {
  std::string name;  // as /healthz says it
  std::unique_ptr<hypervisor::Hypervisor> hv;
  // Template builds' own hypervisor, made on the builder's thread.
  std::function<std::unique_ptr<hypervisor::Hypervisor>()> build_hv;
  std::string version;     // the hypervisor's: templates are keyed by it
  std::string kernel_sha;  // the guest kernel's: templates are keyed by it
  hypervisor::Accel accel = hypervisor::Accel::kTcg;
  std::string accel_reason;
  bool jailed = false;
  std::string jail_note;  // what the jail is, for the log
  // Grows sandbox disks (node::RuntimeOptions::grow_disks); warm pools.
  bool grow_disks = true;
  bool warm_pools = true;
  // Makes `minimal` ready in `templates` (built once per image, kernel
  // and hypervisor version, and cached).
  std::function<Status(boost::asio::io_context&, templates::TemplateStore&)> install_minimal;
  // After recovery: what VMs that died while no vesseld watched left (jails).
  std::function<void()> sweep;
};

using MachineFactory =
    std::function<Result<Machine>(boost::asio::io_context&, const NodeSettings&)>;
// By --hypervisor name.
using Machines = std::map<std::string, MachineFactory>;

// QEMU: the version, the jail, the accelerator probe (and --require-kvm),
// the minimal template built from --minimal-image.
Result<Machine> qemuMachine(boost::asio::io_context& io, const NodeSettings& s);

}  // namespace vessel::vesseld
