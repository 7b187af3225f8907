#pragma once
// Choosing the accelerator. `auto` trusts KVM only after a probe guest has
// booted under it within a short deadline: some hosts (nested or
// paravirtual KVM) expose /dev/kvm yet cannot run a Linux guest, and a
// sandbox platform that hangs on such a host is worse than a slow one. The
// verdict is cached per host so the probe is paid once; a probe QEMU that
// could not open KVM at all (a permission, not the host) is not cached.
#include <string>
#include <string_view>

#include "base/result.h"
#include "hypervisor/hypervisor.h"

namespace vessel::node {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// --accel: KVM only after a probe (auto), KVM or TCG.
enum class AccelMode { kAuto, kKvm, kTcg };
Result<AccelMode> parseAccelMode(std::string_view s);
std::string_view accelModeName(AccelMode m);

struct AccelChoice {
  hypervisor::Accel accel = hypervisor::Accel::kTcg;
  std::string reason;   // why this one (e.g. why KVM was not used)
  bool cached = false;  // the verdict came from the per-host cache
};

struct ProbeInputs {
  std::string kernel;
  std::string image;      // a root filesystem whose init says Hello
  std::string cmdline;    // e.g. init=/sbin/vessel-agent
  std::string run_dir;    // scratch directory for the probe VM
  std::string cache_dir;  // where the verdict is remembered
  std::string qemu_version;
  std::chrono::milliseconds deadline = std::chrono::seconds(5);
};

asio::awaitable<Result<AccelChoice>> chooseAccel(AccelMode mode, hypervisor::Hypervisor& hv,
                                                 const ProbeInputs& in);

}  // namespace vessel::node
