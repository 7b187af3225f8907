// Disk images for QEMU: qcow2 overlays on a template's raw image, private
// copies for forks and flattening for templates made from a sandbox. Each
// is a child process (qemu-img, cp) waited on through its pidfd, so a
// multi-GiB copy never holds the io thread that serves every sandbox.
//
// A sandbox's overlay is a file its QEMU (and so a guest that took QEMU
// over) can rewrite. Every tool that interprets one runs with no more
// rights than a VM (runConfined), is told every format (never probes), and
// is given the backing file by name instead of reading it from the header,
// which is checked before too (qcow2_header.h).
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/this_coro.hpp>
#include <chrono>

#include "base/child_process_async.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/new_id.h"
#include "hypervisor/qemu/qcow2_header.h"
#include "hypervisor/qemu/qemu.h"
#include "os/jail.h"

namespace vessel::hypervisor::qemu {

namespace {

using namespace std::chrono_literals;

// In `jail` when there is one: as PID 1 of its own PID namespace, so the
// tool (and anything a hostile image made it start) sees no host process
// and leaves none behind.
asio::awaitable<Status> runTool(SpawnOptions so, std::chrono::milliseconds limit, std::string what,
                                const os::Jail* jail = nullptr) {
  auto p = jail ? jail->spawn(std::move(so)) : ChildProcess::spawn(so);
  if (!p.ok()) co_return std::move(p).error().withContext(what);
  auto st = co_await waitAsync(*p, limit);
  if (!st.ok()) co_return std::move(st).error().withContext(what);
  if (!st->success()) co_return Error(Code::kInternal, what + ": " + st->describe());
  co_return okStatus();
}

// A new file for a confined tool to write: it must exist to be a mount
// point. 0644: a template's image is read by every VM's uid.
Status makeOutput(const std::string& path, mode_t mode) {
  auto fd = Fd::open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
  if (!fd.ok()) return std::move(fd).error();
  if (::fchmod(fd->get(), mode) != 0) return Error::fromErrno("chmod " + path);
  return okStatus();
}

}  // namespace

asio::awaitable<Status> QemuHypervisor::runConfined(std::vector<std::string> argv,
                                                    std::vector<os::BindMount> files,
                                                    std::vector<std::string> owned,
                                                    std::chrono::milliseconds limit,
                                                    std::string what) {
  SpawnOptions so;
  so.argv = std::move(argv);
  // QEMU's environment, not vesseld's.
  so.env = {"PATH=/usr/bin:/bin"};
  if (!opts_.jail) {
    // No jail for QEMU either: the tool runs as QEMU does, as vesseld.
    co_return co_await runTool(std::move(so), limit, std::move(what));
  }
  os::JailSpec js;
  js.id = newId("img");
  addSystemMounts(js, resolveBinary(so.argv[0]));
  for (auto& f : files) js.mounts.push_back(std::move(f));
  js.owned = std::move(owned);
  // qemu-img's own heap and buffers; its aio worker threads (QEMU aborts if one cannot start).
  js.limits.memory_bytes = 512ull << 20;
  js.limits.cpu_quota_us = 100000;
  js.limits.pids = 128;
  auto j = os::Jail::create(opts_.jail->jailer, std::move(js));
  if (!j.ok()) co_return std::move(j).error().withContext(what);
  std::unique_ptr<os::Jail> jail = std::move(*j);
  // As QEMU is: the jail's uid, no capabilities, its mount view, no
  // network, no System V IPC, its own host name and PID namespace.
  const os::Jail* in = jail.get();
  Status st = co_await runTool(std::move(so), limit, what, in);
  // The tool has exited: its cgroup empties; removed without blocking
  // the io thread, then ~Jail gives the lent files back to root.
  if (auto r = co_await jail->cgroup().removeAsync(); !r.ok())
    Logger("qemu").warn("{}: {}", what, r.error().message());
  jail.reset();
  co_return st;
}

asio::awaitable<Status> QemuHypervisor::createOverlay(std::string path, std::string backing,
                                                      std::string backing_format) {
  // g++ 12: arguments built first, see CONTRIBUTING.md "Coroutines under g++ 12" rule 2.
  // Every format
  // given: a template's raw image is never probed (a guest-written raw
  // image may begin like a qcow2 header). Unconfined: it reads only the
  // template's image, which no VM can write once the template exists.
  std::vector<std::string> argv = {"qemu-img", "create",       "-q", "-f",    "qcow2",
                                   "-F",       backing_format, "-b", backing, path};
  SpawnOptions so;
  so.argv = std::move(argv);
  co_return co_await runTool(std::move(so), 30s, "qemu-img create " + path);
}

asio::awaitable<Status> QemuHypervisor::copyDisk(std::string from, std::string to) {
  // A qcow2 overlay holds only what the sandbox wrote; --sparse keeps its
  // holes, --reflink shares blocks where the filesystem can. cp reads its
  // bytes and interprets none of them: the copy is checked (and confined
  // in what it opens) by whoever uses it next, start() or flattenDisk().
  std::vector<std::string> argv = {"cp", "--sparse=always", "--reflink=auto", from, to};
  SpawnOptions so;
  so.argv = std::move(argv);
  co_return co_await runTool(std::move(so), 600s, "copy disk " + from);
}

asio::awaitable<Status> QemuHypervisor::flattenDisk(Disk overlay, std::string to,
                                                    uint64_t max_bytes) {
  const std::string what = "qemu-img convert " + overlay.path;
  if (overlay.format != "qcow2" || overlay.backing_format != "raw")
    co_return Error(Code::kInvalidArgument, what + ": a qcow2 overlay on a raw image only");
  // The header first: it must name exactly the template's image, nothing
  // a tool would open besides, and a size the sandbox's disk can have.
  if (auto h = checkQcow2Overlay(overlay.path, overlay.backing, overlay.backing_format, max_bytes);
      !h.ok())
    co_return std::move(h).error().withContext(what);
  if (auto m = makeOutput(to, 0644); !m.ok()) co_return std::move(m).error().withContext(what);
  // --image-opts: the driver of every node named, the backing file given
  // by name (qemu-img never follows the header's), only the `file`
  // protocol. No -U: the overlay is a copy nothing else has open.
  std::string image = "driver=qcow2,file.driver=file,file.filename=" + overlay.path;
  if (!overlay.backing.empty())
    image +=
        ",backing.driver=raw,backing.file.driver=file,backing.file.filename=" + overlay.backing;
  std::vector<std::string> argv = {"qemu-img", "convert", "-q",  "--image-opts",
                                   image,      "-O",      "raw", to};
  std::vector<os::BindMount> files = {{overlay.path, false, false, false},
                                      {to, true, false, false}};
  if (!overlay.backing.empty()) files.push_back({overlay.backing, false, false, false});
  // The overlay (vesseld's copy, 0600 root's) and the output are lent to
  // the tool's uid for its run; the template's image is world-readable.
  std::vector<std::string> owned = {overlay.path, to};
  co_return co_await runConfined(std::move(argv), std::move(files), std::move(owned), 600s, what);
}

}  // namespace vessel::hypervisor::qemu
