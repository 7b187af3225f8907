// vesseld: the Vessel control plane and node in one process.
// Flags -> Config -> validate -> run; everything else lives in src/.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "api/daemon.h"
#include "base/config.h"
#include "base/log.h"

int main(int argc, char** argv) {
  vessel::Config cfg;
  std::string accel = "auto";
  CLI::App app{"vesseld: runs Vessel sandboxes and serves the Vessel API"};
  app.add_option("--listen", cfg.listen, "API listener (IPv4:port)")->capture_default_str();
  app.add_option("--data-listen", cfg.data_listen,
                 "data plane listener (IPv4:port; session tokens only)")
      ->capture_default_str();
  app.add_option("--data-url", cfg.data_url,
                 "data plane URL handed to clients (default http://<data-listen>)");
  app.add_option("--state-dir", cfg.state_dir, "state directory (store, sandboxes, sockets)")
      ->envname("VESSEL_STATE_DIR")
      ->capture_default_str();
  app.add_option("--cache-dir", cfg.cache_dir, "cache of kernels, images and probe verdicts")
      ->envname("VESSEL_CACHE_DIR")
      ->capture_default_str();
  app.add_option("--accel", accel, "acceleration: auto, kvm or tcg")->capture_default_str();
  app.add_option("--hypervisor", cfg.hypervisor, "hypervisor backend")->capture_default_str();
  app.add_option("--qemu", cfg.qemu_binary, "QEMU binary")->capture_default_str();
  app.add_option("--kernel", cfg.kernel, "guest kernel (vmlinux)")->envname("VESSEL_KERNEL");
  app.add_option("--minimal-image", cfg.minimal_image, "root filesystem of the minimal template")
      ->envname("VESSEL_MINIMAL_IMAGE");
  app.add_option("--log-level", cfg.log_level, "debug, info, warn or error")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto mode = vessel::parseAccelMode(accel);
  if (!mode.ok()) {
    std::fprintf(stderr, "vesseld: --accel: %s\n", mode.error().message().c_str());
    return 2;
  }
  cfg.accel = *mode;
  if (auto s = cfg.validate(); !s.ok()) {
    std::fprintf(stderr, "vesseld: %s\n", s.error().message().c_str());
    return 2;
  }
  vessel::initLogging(cfg.log_level);
  if (auto s = vessel::api::runDaemon(std::move(cfg)); !s.ok()) {
    std::fprintf(stderr, "vesseld: %s\n", s.error().message().c_str());
    return 1;
  }
  return 0;
}
