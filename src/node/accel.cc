#include "node/accel.h"

#include <fcntl.h>
#include <sys/utsname.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>

#include "base/fd.h"
#include "base/log.h"
#include "base/sha256.h"
#include "node/machine.h"

namespace vessel::node {

namespace fs = std::filesystem;
namespace json = boost::json;
using hypervisor::Accel;

namespace {

std::string cpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line;
  return "";
}

// Which probe made a verdict. 2: QEMU in the jail reaches /dev/kvm through
// a node of its own; verdicts of probe 1 may say "Permission denied" where
// the jail alone kept KVM from a VM, and are not trusted.
constexpr const char* kProbeVersion = "probe 2";

// What the verdict depends on: the host kernel, the CPU, QEMU, the guest
// kernel and the probe. Any change re-probes.
Result<std::string> hostKey(const ProbeInputs& in) {
  utsname u{};
  ::uname(&u);
  VESSEL_ASSIGN_OR_RETURN(std::string kernel_hash, sha256File(in.kernel));
  return sha256Hex(std::string(u.release) + "\n" + u.version + "\n" + cpuModel() + "\n" +
                   in.qemu_version + "\n" + kernel_hash + "\n" + kProbeVersion)
      .substr(0, 16);
}

// A probe that QEMU could not even open KVM in says how this vesseld is set
// up (its jail, a device's permissions), not what the host can do: named,
// but not remembered, so the next start (set up right) probes again.
bool aboutAccess(const std::string& reason) {
  return reason.find("Permission denied") != std::string::npos ||
         reason.find("Operation not permitted") != std::string::npos ||
         reason.find("Could not access KVM") != std::string::npos;
}

asio::awaitable<Result<AccelChoice>> probe(hypervisor::Hypervisor& hv, const ProbeInputs& in) {
  hypervisor::MachineSpec spec;
  spec.id = "accel-probe";
  spec.vcpus = 1;
  spec.memory_mib = 128;
  spec.accel = Accel::kKvm;
  spec.kernel = in.kernel;
  spec.cmdline = in.cmdline;
  spec.disks = {{in.image, true, "raw"}};
  spec.run_dir = in.run_dir;
  spec.console_log = in.run_dir + ".console.log";
  auto m = co_await bootMachine(hv, spec, Clock::now() + in.deadline);
  std::error_code ec;
  fs::remove(spec.console_log, ec);
  if (!m.ok()) {
    // One line for logs and /healthz: QEMU's stderr spans several.
    std::string why = m.error().message().substr(0, 400);
    for (char& c : why)
      if (c == '\n') c = ' ';
    while (!why.empty() && why.back() == ' ') why.pop_back();
    co_return AccelChoice{Accel::kTcg, "KVM probe guest did not boot: " + why};
  }
  (void)co_await m->vm->stop();
  co_return AccelChoice{Accel::kKvm, "KVM probe guest booted"};
}

}  // namespace

Result<AccelMode> parseAccelMode(std::string_view s) {
  if (s == "auto") return AccelMode::kAuto;
  if (s == "kvm") return AccelMode::kKvm;
  if (s == "tcg") return AccelMode::kTcg;
  return Error(Code::kInvalidArgument,
               "accel must be auto, kvm or tcg, not '" + std::string(s) + "'");
}

std::string_view accelModeName(AccelMode m) {
  switch (m) {
    case AccelMode::kAuto: return "auto";
    case AccelMode::kKvm: return "kvm";
    case AccelMode::kTcg: return "tcg";
  }
  return "?";
}

asio::awaitable<Result<AccelChoice>> chooseAccel(AccelMode mode, hypervisor::Hypervisor& hv,
                                                 const ProbeInputs& in) {
  Logger log("accel");
  if (mode == AccelMode::kTcg) co_return AccelChoice{Accel::kTcg, "tcg requested"};
  auto kvm = Fd::open("/dev/kvm", O_RDWR);
  if (mode == AccelMode::kKvm) {
    if (!kvm.ok()) co_return std::move(kvm).error().withContext("--accel=kvm");
    co_return AccelChoice{Accel::kKvm, "kvm requested"};
  }
  if (!kvm.ok()) {
    AccelChoice c{Accel::kTcg, "KVM unavailable: " + kvm.error().message()};
    log.warn("falling back to TCG (slow software emulation): {}", c.reason);
    co_return c;
  }
  auto key = hostKey(in);
  if (!key.ok()) co_return std::move(key).error().withContext("accel probe");
  std::string cache_file = in.cache_dir + "/accel/" + *key + ".json";
  if (auto cached = readFile(cache_file); cached.ok()) {
    boost::system::error_code jec;
    json::value v = json::parse(*cached, jec);
    if (!jec && v.is_object() && v.as_object().contains("accel") &&
        v.as_object().contains("reason") && v.at("accel").is_string() &&
        v.at("reason").is_string()) {
      AccelChoice c{v.at("accel").as_string() == "kvm" ? Accel::kKvm : Accel::kTcg,
                    std::string(v.at("reason").as_string()), true};
      if (c.accel == Accel::kTcg)
        log.warn("falling back to TCG (slow software emulation), remembered for this host: {}",
                 c.reason);
      co_return c;
    }
  }
  log.info("probing KVM with a guest boot (deadline {} ms)", in.deadline.count());
  auto c = co_await probe(hv, in);
  if (!c.ok()) co_return c;
  if (c->accel == Accel::kTcg)
    log.warn("falling back to TCG (slow software emulation): {}", c->reason);
  if (aboutAccess(c->reason)) co_return c;
  std::error_code ec;
  fs::create_directories(in.cache_dir + "/accel", ec);
  json::object o{{"accel", std::string(hypervisor::accelName(c->accel))}, {"reason", c->reason}};
  if (auto w = writeFileAtomic(cache_file, json::serialize(o)); !w.ok())
    log.warn("cannot remember the probe verdict: {}", w.error().message());
  co_return c;
}

}  // namespace vessel::node
