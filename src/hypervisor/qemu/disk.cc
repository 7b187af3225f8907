// Disk images for QEMU: qcow2 overlays on a template's raw image, private
// copies for forks and flattening for templates made from a sandbox. Each
// is a child process (qemu-img, cp) waited on through its pidfd, so a
// multi-GiB copy never holds the io thread that serves every sandbox.
#include <boost/asio/this_coro.hpp>
#include <chrono>

#include "base/child_process_async.h"
#include "hypervisor/qemu/qemu.h"

namespace vessel::hypervisor::qemu {

namespace {

using namespace std::chrono_literals;

asio::awaitable<Status> runTool(std::vector<std::string> argv, std::chrono::milliseconds limit,
                                std::string what) {
  SpawnOptions so;
  so.argv = std::move(argv);
  auto p = ChildProcess::spawn(so);
  if (!p.ok()) co_return std::move(p).error().withContext(what);
  auto st = co_await waitAsync(*p, limit);
  if (!st.ok()) co_return std::move(st).error().withContext(what);
  if (!st->success()) co_return Error(Code::kInternal, what + ": " + st->describe());
  co_return okStatus();
}

}  // namespace

asio::awaitable<Status> QemuHypervisor::createOverlay(std::string path, std::string backing,
                                                      std::string backing_format) {
  // Arguments built outside the co_await: g++ 12 miscompiles braced
  // initializers holding string literals in coroutine calls.
  std::vector<std::string> argv = {"qemu-img", "create",       "-q", "-f",    "qcow2",
                                   "-F",       backing_format, "-b", backing, path};
  co_return co_await runTool(std::move(argv), 30s, "qemu-img create " + path);
}

asio::awaitable<Status> QemuHypervisor::copyDisk(std::string from, std::string to) {
  // A qcow2 overlay holds only what the sandbox wrote; --sparse keeps its
  // holes, --reflink shares blocks where the filesystem can.
  std::vector<std::string> argv = {"cp", "--sparse=always", "--reflink=auto", from, to};
  co_return co_await runTool(std::move(argv), 600s, "copy disk " + from);
}

asio::awaitable<Status> QemuHypervisor::flattenDisk(std::string overlay, std::string to) {
  std::vector<std::string> argv = {"qemu-img", "convert", "-q", "-O", "raw", overlay, to};
  co_return co_await runTool(std::move(argv), 600s, "qemu-img convert " + overlay);
}

}  // namespace vessel::hypervisor::qemu
