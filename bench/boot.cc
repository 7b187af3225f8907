// bench/boot: cold boot, from spawning QEMU to the guest agent's Hello, over
// many runs. Sequential runs so that each boot has the machine to itself.
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "base/log.h"
#include "base/run_blocking.h"
#include "bench_util.h"
#include "hypervisor/qemu/qemu.h"
#include "node/machine.h"

using namespace vessel;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::atoi(argv[1]) : 20;
  initLogging("warn");
  std::string kernel = bench::env("VESSEL_KERNEL");
  std::string image = bench::env("VESSEL_MINIMAL_IMAGE");
  std::string accel_name =
      std::getenv("VESSEL_BENCH_ACCEL") ? std::getenv("VESSEL_BENCH_ACCEL") : "tcg";
  hypervisor::Accel accel = accel_name == "kvm" ? hypervisor::Accel::kKvm : hypervisor::Accel::kTcg;
  std::string dir = "/tmp/vessel-bench-boot-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);

  boost::asio::io_context io;
  hypervisor::qemu::QemuHypervisor hv({});
  std::vector<double> ready_ms, stop_ms;
  for (int i = 0; i < runs; ++i) {
    hypervisor::MachineSpec s;
    s.id = "bench-boot-" + std::to_string(i);
    s.accel = accel;
    s.kernel = kernel;
    s.cmdline = "init=/sbin/vessel-agent";
    s.disks = {{image, true, "raw"}};
    s.run_dir = dir + "/" + s.id;
    s.console_log = dir + "/console.log";
    auto t0 = Clock::now();
    auto m = runBlocking(io, node::bootMachine(hv, s, Clock::now() + std::chrono::seconds(60)));
    auto t1 = Clock::now();
    if (!m.ok()) {
      std::fprintf(stderr, "run %d failed: %s\n", i, m.error().message().c_str());
      return 1;
    }
    (void)runBlocking(io, m->vm->stop());
    auto t2 = Clock::now();
    ready_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    stop_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  std::filesystem::remove_all(dir);
  auto r = bench::stats(ready_ms), st = bench::stats(stop_ms);
  std::printf(
      "\nbench/boot: cold boot of the minimal template, %d runs, accel %s, 1 vCPU, 256 MiB\n\n",
      runs, accel_name.c_str());
  std::printf("| measure | n | min ms | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|---|\n");
  std::printf("| spawn to ready | %zu | %.0f | %.0f | %.0f | %.0f |\n", r.n, r.min, r.p50, r.p99,
              r.max);
  std::printf("| stop (QMP quit to reaped) | %zu | %.0f | %.0f | %.0f | %.0f |\n\n", st.n, st.min,
              st.p50, st.p99, st.max);
  bench::writeResults("boot", {{"benchmark", "boot"},
                               {"accel", accel_name},
                               {"runs", runs},
                               {"spawn_to_ready_ms", bench::toJson(r)},
                               {"stop_ms", bench::toJson(st)}});
  return 0;
}
