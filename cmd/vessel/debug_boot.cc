// `vessel debug boot`: boots one VM from a kernel and an image with the
// node's own code path and attaches the terminal to its console: guest
// output is followed on stdout, typed lines go to the guest's hvc0. Ctrl-C
// stops the VM. A developer's tool; it does not go through vesseld.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/log.h"
#include "base/run_blocking.h"
#include "cmd/vessel/commands.h"
#include "hypervisor/qemu/qemu.h"
#include "node/machine.h"

namespace vessel::cli {

namespace {

struct DebugBootOptions {
  std::string kernel, image, init = "/sbin/vessel-agent", accel = "tcg", extra_cmdline;
  unsigned vcpus = 1;
  uint64_t memory_mib = 256;
  bool writable = false;
  int timeout_s = 60;
};

int runDebugBoot(const DebugBootOptions& o) {
  initLogging("info");
  namespace asio = boost::asio;
  hypervisor::MachineSpec s;
  s.id = "debug-" + std::to_string(::getpid());
  s.vcpus = o.vcpus;
  s.memory_mib = o.memory_mib;
  s.accel = o.accel == "kvm" ? hypervisor::Accel::kKvm : hypervisor::Accel::kTcg;
  s.kernel = o.kernel;
  s.cmdline = "init=" + o.init + (o.extra_cmdline.empty() ? "" : " " + o.extra_cmdline);
  s.disks = {{o.image, !o.writable, "raw"}};
  std::string dir = "/tmp/vessel-debug-" + std::to_string(::getpid());
  s.run_dir = dir + "/vm";
  s.console_log = dir + "/console.log";
  std::filesystem::create_directories(dir);

  asio::io_context io;
  hypervisor::qemu::QemuHypervisor hv({});
  auto deadline = node::Clock::now() + std::chrono::seconds(o.timeout_s);
  std::unique_ptr<hypervisor::Vm> vm;
  if (o.init == "/sbin/vessel-agent") {
    auto m = runBlocking(io, node::bootMachine(hv, s, deadline));
    if (!m.ok()) {
      std::fprintf(stderr, "vessel: %s\n", m.error().message().c_str());
      std::filesystem::remove_all(dir);
      return 1;
    }
    std::fprintf(stderr, "vessel: guest ready (%s); console follows, Ctrl-C stops the VM\n",
                 m->hello.agent_version.c_str());
    vm = std::move(m->vm);
  } else {
    auto v = runBlocking(io, hv.start(s, deadline));
    if (!v.ok()) {
      std::fprintf(stderr, "vessel: %s\n", v.error().message().c_str());
      std::filesystem::remove_all(dir);
      return 1;
    }
    vm = std::move(*v);
    std::fprintf(stderr, "vessel: VM started with init=%s; Ctrl-C stops it\n", o.init.c_str());
  }

  bool done = false;
  asio::signal_set sigs(io, SIGINT, SIGTERM);
  sigs.async_wait([&](auto, int) { done = true; });
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto st = co_await vm->waitExit();
        std::fprintf(stderr, "\nvessel: VM exited (%s)\n", st.describe().c_str());
        done = true;
      },
      asio::detached);
  // Follow the console log; forward stdin to the guest console.
  Fd log;
  off_t off = 0;
  char buf[8192];
  while (!done) {
    io.run_for(std::chrono::milliseconds(50));
    if (!log.valid()) {
      auto f = Fd::open(s.console_log, O_RDONLY);
      if (f.ok()) log = std::move(*f);
    }
    if (log.valid()) {
      ssize_t n;
      while ((n = ::pread(log.get(), buf, sizeof buf, off)) > 0) {
        (void)!::write(1, buf, static_cast<size_t>(n));
        off += n;
      }
    }
    pollfd p{0, POLLIN, 0};
    if (::poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) {
      ssize_t n = ::read(0, buf, sizeof buf);
      if (n > 0) (void)vm->writeConsole(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  (void)runBlocking(io, vm->stop());
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace

void addDebugBoot(CLI::App& debug, std::function<int()>* run) {
  auto o = std::make_shared<DebugBootOptions>();
  auto* c =
      debug.add_subcommand("boot", "boot a VM from a kernel and an image, attach its console");
  c->add_option("--kernel", o->kernel, "guest vmlinux")->envname("VESSEL_KERNEL")->required();
  c->add_option("--image", o->image, "root filesystem image (ext4)")
      ->envname("VESSEL_MINIMAL_IMAGE")
      ->required();
  c->add_option("--init", o->init, "init program in the image (e.g. /bin/sh for a shell)")
      ->capture_default_str();
  c->add_option("--accel", o->accel, "tcg or kvm")
      ->check(CLI::IsMember({"tcg", "kvm"}))
      ->capture_default_str();
  c->add_option("--vcpus", o->vcpus, "vCPUs")->check(CLI::Range(1, 64))->capture_default_str();
  c->add_option("--memory", o->memory_mib, "memory in MiB")->capture_default_str();
  c->add_option("--cmdline", o->extra_cmdline, "extra kernel parameters");
  c->add_flag("--writable", o->writable, "attach the image read-write (changes persist)");
  c->add_option("--timeout", o->timeout_s, "seconds to wait for the guest")->capture_default_str();
  c->callback([o, run] { *run = [o] { return runDebugBoot(*o); }; });
}

}  // namespace vessel::cli
