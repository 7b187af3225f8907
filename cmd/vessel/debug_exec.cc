// `vessel debug exec -- CMD...`: boots one VM with the node's own code path,
// runs one command through the guest agent, streams its stdout and stderr to
// ours (stdin too with -i), and exits with its exit code (128+signal if it
// was killed). Ctrl-C is forwarded to the guest process as SIGINT. A
// developer's tool; it does not go through vesseld.
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdio>
#include <filesystem>

#include "agentclient/agent_client.h"
#include "base/log.h"
#include "base/run_blocking.h"
#include "cmd/vessel/commands.h"
#include "hypervisor/qemu/qemu.h"
#include "node/machine.h"

namespace vessel::cli {

namespace {

namespace asio = boost::asio;

struct DebugExecOptions {
  std::string kernel, image, accel = "tcg", user, cwd, shell;
  std::vector<std::string> env, command;
  uint64_t memory_mib = 256;
  bool interactive = false, pty = false;
  int timeout_s = 60, exec_timeout_s = 0;
};

void writeAll(int fd, std::string_view d) {
  while (!d.empty()) {
    ssize_t n = ::write(fd, d.data(), d.size());
    if (n <= 0) return;  // our stdout went away: nothing useful left to do
    d.remove_prefix(static_cast<size_t>(n));
  }
}

// Copies our stdin to the process until EOF, then closes its stdin.
asio::awaitable<void> pumpStdin(agentclient::Process* p) {
  asio::posix::stream_descriptor in(co_await asio::this_coro::executor, ::dup(0));
  char buf[65536];
  for (;;) {
    auto [ec, n] =
        co_await in.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    if (ec) break;
    if (!(co_await p->writeStdin(std::string_view(buf, n))).ok()) co_return;
  }
  (void)co_await p->closeStdin();
}

asio::awaitable<int> session(agentclient::AgentClient& c, agentclient::ExecSpec spec,
                             bool interactive) {
  auto op = c.exec(std::move(spec));
  auto p = co_await std::move(op);
  if (!p.ok()) {
    std::fprintf(stderr, "vessel: exec: %s\n", p.error().message().c_str());
    co_return 125;
  }
  agentclient::Process* proc = p->get();
  auto ex = co_await asio::this_coro::executor;
  if (interactive) asio::co_spawn(ex, pumpStdin(proc), asio::detached);
  asio::signal_set sigs(ex, SIGINT);
  std::function<void(boost::system::error_code, int)> forward = [&](auto ec, int) {
    if (ec) return;
    asio::co_spawn(
        ex, [proc]() -> asio::awaitable<void> { (void)co_await proc->signal(SIGINT); },
        asio::detached);
    sigs.async_wait(forward);
  };
  sigs.async_wait(forward);
  for (;;) {
    auto ev = co_await proc->next();
    if (!ev.ok()) {
      std::fprintf(stderr, "vessel: %s\n", ev.error().message().c_str());
      co_return 125;
    }
    switch (ev->kind) {
      case agentclient::ProcessEvent::Kind::kStdout: writeAll(1, ev->data); break;
      case agentclient::ProcessEvent::Kind::kStderr: writeAll(2, ev->data); break;
      case agentclient::ProcessEvent::Kind::kExit:
        sigs.cancel();
        if (ev->exit.timed_out) std::fprintf(stderr, "vessel: command timed out\n");
        co_return ev->exit.exited ? ev->exit.code : 128 + ev->exit.signal;
    }
  }
}

int runDebugExec(const DebugExecOptions& o) {
  initLogging("warn");
  if (o.command.empty() == o.shell.empty()) {
    std::fprintf(stderr, "vessel: give either --sh 'COMMAND' or -- ARGV...\n");
    return 2;
  }
  hypervisor::MachineSpec s;
  s.id = "debug-exec-" + std::to_string(::getpid());
  s.memory_mib = o.memory_mib;
  s.accel = o.accel == "kvm" ? hypervisor::Accel::kKvm : hypervisor::Accel::kTcg;
  s.kernel = o.kernel;
  s.cmdline = "init=/sbin/vessel-agent";
  s.disks = {{o.image, true, "raw"}};
  std::string dir = "/tmp/vessel-debug-" + std::to_string(::getpid());
  s.run_dir = dir + "/vm";
  s.console_log = dir + "/console.log";
  std::filesystem::create_directories(dir);

  asio::io_context io;
  hypervisor::qemu::QemuHypervisor hv({});
  auto m = runBlocking(
      io, node::bootMachine(hv, s, node::Clock::now() + std::chrono::seconds(o.timeout_s)));
  if (!m.ok()) {
    std::fprintf(stderr, "vessel: %s\n", m.error().message().c_str());
    std::filesystem::remove_all(dir);
    return 125;
  }
  auto client = agentclient::AgentClient::create(std::move(m->vm->agentChannel()),
                                                 std::move(m->leftover), s.id);
  agentclient::ExecSpec e;
  e.argv = o.command;
  e.shell = o.shell;
  e.env = o.env;
  e.user = o.user;
  e.cwd = o.cwd;
  e.pty = o.pty;
  winsize ws{};
  if (o.pty && ::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
    e.rows = ws.ws_row;  // the guest terminal starts with our size
    e.cols = ws.ws_col;
  }
  e.timeout = std::chrono::seconds(o.exec_timeout_s);
  int rc = runBlocking(io, session(*client, std::move(e), o.interactive));
  client->close();
  (void)runBlocking(io, m->vm->stop());
  std::filesystem::remove_all(dir);
  return rc;
}

}  // namespace

void addDebugExec(CLI::App& debug, std::function<int()>* run) {
  auto o = std::make_shared<DebugExecOptions>();
  auto* c = debug.add_subcommand(
      "exec", "boot a VM and run one command through the guest agent, streaming its output");
  c->add_option("--kernel", o->kernel, "guest vmlinux")->envname("VESSEL_KERNEL")->required();
  c->add_option("--image", o->image, "root filesystem image with vessel-agent")
      ->envname("VESSEL_MINIMAL_IMAGE")
      ->required();
  c->add_option("--accel", o->accel, "tcg or kvm")
      ->check(CLI::IsMember({"tcg", "kvm"}))
      ->capture_default_str();
  c->add_option("--memory", o->memory_mib, "memory in MiB")->capture_default_str();
  c->add_option("--user", o->user, "run as this guest user (default: user; root on request)");
  c->add_option("--cwd", o->cwd, "working directory (default: the user's home)");
  c->add_option("-e,--env", o->env, "KEY=VALUE, repeatable");
  c->add_option("--sh", o->shell, "a shell command, run by /bin/sh -c");
  c->add_flag("-i,--interactive", o->interactive, "copy our stdin to the command");
  c->add_flag("-t,--tty", o->pty, "run the command on a pseudo-terminal");
  c->add_option("--timeout", o->timeout_s, "seconds to wait for the guest")->capture_default_str();
  c->add_option("--exec-timeout", o->exec_timeout_s, "kill the command after this many seconds");
  c->add_option("command", o->command, "argv to run (after --)");
  c->callback([o, run] { *run = [o] { return runDebugExec(*o); }; });
}

}  // namespace vessel::cli
