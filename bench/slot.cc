// bench/slot: how long one network slot takes to make and to destroy
// (namespace, veth, tap, two nftables rulesets, sysctls: today some
// seventeen ip/nft/sysctl processes). Needs root. A slot is made on the
// create path only when the pool has no ready one (docs/gateway.md).
#include <unistd.h>

#include <cstdio>

#include "bench_util.h"
#include "node/network/slot_pool.h"
#include "os/netns.h"

using namespace vessel;

int main(int argc, char** argv) {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "bench_slot needs root\n");
    return 2;
  }
  int n = argc > 1 ? std::atoi(argv[1]) : 20;
  std::string id = std::to_string(::getpid());
  auto gw = os::Netns::create("vb-slot-gw-" + id);
  if (!gw.ok()) {
    std::fprintf(stderr, "%s\n", gw.error().message().c_str());
    return 1;
  }
  node::network::NetworkLayout layout;
  layout.gateway_netns = gw->name();
  layout.prefix = "vb" + id.substr(id.size() > 4 ? id.size() - 4 : 0);
  auto pool = node::network::SlotPool::create(layout, 0);
  if (!pool.ok()) {
    std::fprintf(stderr, "%s\n", pool.error().message().c_str());
    return 1;
  }
  std::vector<double> make, destroy;
  for (int i = 0; i < n; ++i) {
    auto t = std::chrono::steady_clock::now();
    auto slot = (*pool)->acquire();
    if (!slot.ok()) {
      std::fprintf(stderr, "%s\n", slot.error().message().c_str());
      return 1;
    }
    make.push_back(bench::msSince(t));
    t = std::chrono::steady_clock::now();
    (*pool)->release(std::move(*slot));
    destroy.push_back(bench::msSince(t));
  }
  auto m = bench::stats(make), d = bench::stats(destroy);
  std::printf("%-14s %6s %8s %8s %8s %8s\n", "slot (ms)", "n", "min", "p50", "p99", "max");
  std::printf("%-14s %6zu %8.1f %8.1f %8.1f %8.1f\n", "create", m.n, m.min, m.p50, m.p99, m.max);
  std::printf("%-14s %6zu %8.1f %8.1f %8.1f %8.1f\n", "destroy", d.n, d.min, d.p50, d.p99, d.max);
  bench::writeResults("slot", {{"create_ms", bench::toJson(m)}, {"destroy_ms", bench::toJson(d)}});
  return 0;
}
