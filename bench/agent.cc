// bench/agent: the agent channel's costs, through AgentClient. Exec round
// trip of `true` (p50/p99), ping round trip, stdout throughput, and file
// upload/download throughput, in a real guest (QEMU microvm, TCG here) and,
// for comparison, with the agent run on the host over a socketpair.
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "agentclient/agent_client.h"
#include "agentclient/testing/agent_harness.h"
#include "base/log.h"
#include "bench_util.h"
#include "hypervisor/qemu/qemu.h"
#include "node/machine.h"

using namespace vessel;
using agentclient::testing::runFor;
using bench::msSince;
using Clock = std::chrono::steady_clock;
namespace json = boost::json;
namespace asio = boost::asio;

namespace {

struct Results {
  bench::Stats exec, ping;
  double stdout_mibs = 0, upload_mibs = 0, download_mibs = 0;
};

#define BENCH_CHECK(expr)                                                    \
  do {                                                                       \
    const auto& r_ = (expr);                                                 \
    if (!r_.ok()) {                                                          \
      std::fprintf(stderr, "%s: %s\n", #expr, r_.error().message().c_str()); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

Results measure(asio::io_context& io, agentclient::AgentClient& c, int runs, size_t mib,
                const std::string& dir) {
  Results res;
  std::vector<double> exec_ms, ping_ms;
  agentclient::ExecSpec t;
  t.argv = {"true"};
  for (int i = 0; i < runs + 5; ++i) {
    auto t0 = Clock::now();
    BENCH_CHECK(runFor(io, c.run(t)));
    if (i >= 5) exec_ms.push_back(msSince(t0));  // the first few warm the guest's caches
    t0 = Clock::now();
    BENCH_CHECK(runFor(io, c.ping()));
    if (i >= 5) ping_ms.push_back(msSince(t0));
  }
  res.exec = bench::stats(exec_ms);
  res.ping = bench::stats(ping_ms);

  agentclient::ExecSpec out;
  out.shell = "dd if=/dev/zero bs=65536 count=" + std::to_string(mib * 16) + " 2>/dev/null";
  auto t0 = Clock::now();
  auto p = runFor(io, c.exec(out));
  BENCH_CHECK(p);
  size_t got = 0;
  for (;;) {
    auto ev = runFor(io, (*p)->next(), std::chrono::seconds(300));
    BENCH_CHECK(ev);
    if (ev->kind == agentclient::ProcessEvent::Kind::kExit) break;
    got += ev->data.size();
  }
  res.stdout_mibs = static_cast<double>(got) / (1 << 20) / (msSince(t0) / 1000);

  std::string chunk = agentclient::testing::PatternSource(1).next(1 << 20);
  agentclient::WriteFileOptions o;
  o.path = dir + "/bench-file";
  t0 = Clock::now();
  auto w = runFor(io, c.writeFile(o));
  BENCH_CHECK(w);
  for (size_t i = 0; i < mib; ++i) BENCH_CHECK(runFor(io, (*w)->write(chunk)));
  BENCH_CHECK(runFor(io, (*w)->finish()));
  res.upload_mibs = static_cast<double>(mib) / (msSince(t0) / 1000);

  t0 = Clock::now();
  auto r = runFor(io, c.readFile(o.path));
  BENCH_CHECK(r);
  size_t down = 0;
  for (;;) {
    auto ch = runFor(io, (*r)->read());
    BENCH_CHECK(ch);
    if (!ch->has_value()) break;
    down += (*ch)->size();
  }
  res.download_mibs = static_cast<double>(down) / (1 << 20) / (msSince(t0) / 1000);
  BENCH_CHECK(runFor(io, c.remove(o.path)));
  return res;
}

json::object toJson(const Results& r) {
  return {{"exec_true_ms", bench::toJson(r.exec)},
          {"ping_ms", bench::toJson(r.ping)},
          {"stdout_mib_per_s", r.stdout_mibs},
          {"upload_mib_per_s", r.upload_mibs},
          {"download_mib_per_s", r.download_mibs}};
}

void row(const char* where, const Results& r) {
  std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f |\n", where, r.exec.p50,
              r.exec.p99, r.ping.p50, r.ping.p99, r.stdout_mibs, r.upload_mibs, r.download_mibs);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::atoi(argv[1]) : 200;
  size_t mib = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 64;
  initLogging("warn");
  std::string kernel = bench::env("VESSEL_KERNEL");
  std::string image = bench::env("VESSEL_MINIMAL_IMAGE");
  std::string dir = "/tmp/vessel-bench-agent-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  asio::io_context io;

  // In a guest: files go to the guest's /tmp (tmpfs), so disk speed is not
  // what is measured.
  hypervisor::qemu::QemuHypervisor hv({});
  hypervisor::MachineSpec s;
  s.id = "bench-agent";
  s.kernel = kernel;
  s.cmdline = "init=/sbin/vessel-agent";
  s.disks = {{image, true, "raw"}};
  s.run_dir = dir + "/vm";
  s.console_log = dir + "/console.log";
  auto m = runFor(io, node::bootMachine(hv, s, Clock::now() + std::chrono::seconds(60)),
                  std::chrono::seconds(90));
  BENCH_CHECK(m);
  auto guest = agentclient::AgentClient::create(std::move(m->vm->agentChannel()),
                                                std::move(m->leftover), "bench-agent");
  Results vm = measure(io, *guest, runs, mib, "/tmp");
  guest->close();
  (void)runFor(io, m->vm->stop());

  auto host = agentclient::testing::HostAgent::start(io, VESSEL_AGENT_BINARY);
  BENCH_CHECK(host);
  Results local = measure(io, *(*host)->client(), runs, mib, dir);
  host->reset();
  std::filesystem::remove_all(dir);

  std::printf(
      "\nbench/agent: AgentClient round trips and throughput, %d runs, %zu MiB transfers\n\n", runs,
      mib);
  std::printf(
      "| where | exec `true` p50 ms | p99 ms | ping p50 ms | p99 ms | stdout MiB/s | upload "
      "MiB/s | download MiB/s |\n|---|---|---|---|---|---|---|---|\n");
  row("guest (QEMU microvm, TCG, virtio-serial)", vm);
  row("host-run agent (socketpair, no VM)", local);
  std::printf("\n");
  bench::writeResults("agent", {{"runs", runs},
                                {"transfer_mib", mib},
                                {"guest_tcg", toJson(vm)},
                                {"host_socketpair", toJson(local)}});
  return 0;
}
