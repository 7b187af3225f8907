// The QEMU backend's work on the host outside a running VM: its version,
// QEMUs no vesseld watches, and what dead VMs left of their jails.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>

#include "base/child_process.h"
#include "base/fd.h"
#include "base/log.h"
#include "hypervisor/qemu/qemu.h"
#include "hypervisor/qemu/qmp.h"

namespace vessel::hypervisor::qemu {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

asio::awaitable<Status> QemuHypervisor::stopOrphan(std::string run_dir) {
  auto ex = co_await asio::this_coro::executor;
  std::string path = run_dir + "/qmp.sock";
  for (int attempt = 0; attempt < 50; ++attempt) {
    Socket s(ex);
    boost::system::error_code ec;
    s.connect(asio::local::stream_protocol::endpoint(path), ec);
    // Nobody listening (or no socket): no QEMU serves this directory.
    if (ec) co_return okStatus();
    if (attempt == 0) {
      auto qmp = co_await QmpClient::handshake(std::move(s), Clock::now() + 5s);
      if (qmp.ok()) (void)co_await (*qmp)->execute("quit", {}, 2s);
    }
    // Until QEMU has gone, its socket still accepts connections.
    asio::steady_timer t(ex, 100ms);
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  co_return Error(Code::kDeadlineExceeded, "the QEMU serving " + run_dir + " did not quit");
}

void QemuHypervisor::sweepJails() {
  if (!opts_.jail) return;
  const os::JailerConfig& jc = opts_.jail->jailer;
  Logger log("qemu");
  size_t uids = jc.uids ? jc.uids->sweep() : 0;
  size_t groups = os::sweepCgroups(jc.cgroups, jc.name_prefix);
  size_t dirs = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(jc.jail_root, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(jc.name_prefix, 0) != 0) continue;
    // A live VM's cgroup is still there (its QEMU is in it).
    auto cg = os::Cgroup::dirsFor(jc.cgroups, name);
    if (!cg.empty() && fs::exists(cg.front(), ec)) continue;
    if (::rmdir(e.path().c_str()) == 0) ++dirs;
  }
  if (uids + groups + dirs > 0)
    log.info("removed what dead VMs left: {} uid leases, {} cgroups, {} jail dirs", uids, groups,
             dirs);
}

Result<std::string> qemuVersion(const std::string& binary) {
  VESSEL_ASSIGN_OR_RETURN(Pipe p, Pipe::create());
  SpawnOptions so;
  so.argv = {binary, "--version"};
  so.fds = {{p.write.get(), 1}};
  VESSEL_ASSIGN_OR_RETURN(ChildProcess c, ChildProcess::spawn(so));
  p.write.reset();
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(p.read.get(), buf, sizeof buf)) > 0 && out.size() < 4096)
    out.append(buf, static_cast<size_t>(n));
  auto st = c.waitFor(5s);
  if (!st.ok() || !st->success()) return Error(Code::kUnavailable, binary + " --version failed");
  auto nl = out.find('\n');
  return out.substr(0, nl);
}

}  // namespace vessel::hypervisor::qemu
