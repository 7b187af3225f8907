#include "os/cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "base/fd.h"

namespace vessel::os {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// O_CREAT: cgroupfs ignores it for its knobs; a plain directory standing in
// for a hierarchy (tests) gets the file.
Status writeKnob(const std::string& dir, const std::string& knob, const std::string& value) {
  auto fd = Fd::open(dir + "/" + knob, O_WRONLY | O_CREAT, 0644);
  if (!fd.ok()) return std::move(fd).error();
  if (::write(fd->get(), value.data(), value.size()) != static_cast<ssize_t>(value.size()))
    return Error::fromErrno("write " + value + " to " + dir + "/" + knob);
  return okStatus();
}

std::vector<std::string> hierarchies(const CgroupConfig& cfg) {
  if (cfg.unified) return {cfg.fs_root};
  std::vector<std::string> h = {cfg.fs_root + "/memory", cfg.fs_root + "/cpu",
                                cfg.fs_root + "/pids"};
  if (cfg.v1_blkio) h.push_back(cfg.fs_root + "/blkio");
  return h;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// The first of `knobs` that takes `value` (the I/O weight's knob depends on
// the host's scheduler); false when none does.
bool writeFirst(const std::string& dir, std::initializer_list<const char*> knobs,
                const std::string& value) {
  for (const char* k : knobs)
    if (writeKnob(dir, k, value).ok()) return true;
  return false;
}

std::string devName(const CgroupLimits::IoMax& m) {
  return std::to_string(m.major) + ":" + std::to_string(m.minor);
}

// v2's io controller, when the hierarchy offers it (a stand-in directory
// without cgroup.controllers is taken to).
bool ioAvailable(const std::string& root) {
  auto c = readFile(root + "/cgroup.controllers", 4096);
  if (!c.ok()) return true;
  std::string s = " " + *c + " ";
  for (char& ch : s)
    if (ch == '\n') ch = ' ';
  return s.find(" io ") != std::string::npos;
}

Status setIoV2(const std::string& d, const CgroupLimits& l) {
  if (l.io_weight)
    (void)writeFirst(d, {"io.weight", "io.bfq.weight"},
                     "default " + std::to_string(std::min<uint32_t>(l.io_weight, 10000)));
  for (const auto& m : l.io_max) {
    std::string line = devName(m);
    auto add = [&](const char* k, uint64_t v) {
      if (v) line += std::string(" ") + k + "=" + std::to_string(v);
    };
    add("rbps", m.rbps);
    add("wbps", m.wbps);
    add("riops", m.riops);
    add("wiops", m.wiops);
    VESSEL_TRY(writeKnob(d, "io.max", line));
  }
  return okStatus();
}

Status setIoV1(const std::string& d, const CgroupLimits& l) {
  if (l.io_weight)
    (void)writeFirst(d, {"blkio.bfq.weight", "blkio.weight"},
                     std::to_string(std::clamp<uint32_t>(l.io_weight, 1, 1000)));
  for (const auto& m : l.io_max) {
    const std::pair<const char*, uint64_t> knobs[] = {
        {"blkio.throttle.read_bps_device", m.rbps},
        {"blkio.throttle.write_bps_device", m.wbps},
        {"blkio.throttle.read_iops_device", m.riops},
        {"blkio.throttle.write_iops_device", m.wiops}};
    for (const auto& [k, v] : knobs)
      if (v) VESSEL_TRY(writeKnob(d, k, devName(m) + " " + std::to_string(v)));
  }
  return okStatus();
}

}  // namespace

Result<CgroupConfig> detectCgroups(std::string fs_root, std::string parent) {
  struct statfs st {};
  if (::statfs(fs_root.c_str(), &st) != 0) return Error::fromErrno("statfs " + fs_root);
  CgroupConfig c{fs_root, parent, st.f_type == CGROUP2_SUPER_MAGIC};
  if (!c.unified) {
    struct statfs bs {};
    c.v1_blkio =
        ::statfs((fs_root + "/blkio").c_str(), &bs) == 0 && bs.f_type == CGROUP_SUPER_MAGIC;
    for (const auto& h : hierarchies(c)) {
      struct statfs hs {};
      if (::statfs(h.c_str(), &hs) != 0 || hs.f_type != CGROUP_SUPER_MAGIC)
        return Error(Code::kUnavailable,
                     "no cgroup v2 at " + fs_root + " and no v1 hierarchy at " + h);
    }
  }
  return c;
}

Cgroup& Cgroup::operator=(Cgroup&& o) noexcept {
  if (this != &o) {
    (void)remove();
    dirs_ = std::exchange(o.dirs_, {});
  }
  return *this;
}

std::vector<std::string> Cgroup::dirsFor(const CgroupConfig& cfg, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& h : hierarchies(cfg)) out.push_back(h + "/" + cfg.parent + "/" + name);
  return out;
}

Result<Cgroup> Cgroup::create(const CgroupConfig& cfg, const std::string& name,
                              const CgroupLimits& limits) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.')
    return Error(Code::kInvalidArgument, "cgroup name '" + name + "'");
  const std::string ctx = "cgroup " + name;
  Cgroup cg;
  for (const auto& h : hierarchies(cfg)) {
    std::string parent = h + "/" + cfg.parent;
    if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
      return Error::fromErrno("mkdir " + parent).withContext(ctx);
    if (cfg.unified) {
      // Controllers are handed down one level at a time; already-enabled
      // ones are no error.
      const std::string controllers =
          ioAvailable(h) ? "+memory +cpu +pids +io" : "+memory +cpu +pids";
      (void)writeKnob(h, "cgroup.subtree_control", controllers);
      VESSEL_TRY_CTX(writeKnob(parent, "cgroup.subtree_control", controllers), ctx);
    }
    std::string dir = parent + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0) return Error::fromErrno("mkdir " + dir).withContext(ctx);
    cg.dirs_.push_back(dir);
  }
  const auto& d = cg.dirs_;
  if (cfg.unified) {
    if (limits.memory_bytes) {
      VESSEL_TRY_CTX(writeKnob(d[0], "memory.max", std::to_string(limits.memory_bytes)), ctx);
      // Guest RAM must not be pushed to swap behind the guest's back.
      (void)writeKnob(d[0], "memory.swap.max", "0");
    }
    if (limits.cpu_quota_us)
      VESSEL_TRY_CTX(writeKnob(d[0], "cpu.max", std::to_string(limits.cpu_quota_us) + " 100000"),
                     ctx);
    if (limits.pids) VESSEL_TRY_CTX(writeKnob(d[0], "pids.max", std::to_string(limits.pids)), ctx);
    VESSEL_TRY_CTX(setIoV2(d[0], limits), ctx);
  } else {
    if (limits.memory_bytes) {
      VESSEL_TRY_CTX(writeKnob(d[0], "memory.limit_in_bytes", std::to_string(limits.memory_bytes)),
                     ctx);
      // With swap accounting on, v1's memory limit leaves swap unlimited:
      // memory+swap capped at the same bytes means no swap at all, as
      // memory.swap.max=0 does on v2. The hierarchy's root shows whether
      // the knob exists (its leaves have it then).
      if (exists(cfg.fs_root + "/memory/memory.memsw.limit_in_bytes"))
        VESSEL_TRY_CTX(
            writeKnob(d[0], "memory.memsw.limit_in_bytes", std::to_string(limits.memory_bytes)),
            ctx);
    }
    if (limits.cpu_quota_us) {
      VESSEL_TRY_CTX(writeKnob(d[1], "cpu.cfs_period_us", "100000"), ctx);
      VESSEL_TRY_CTX(writeKnob(d[1], "cpu.cfs_quota_us", std::to_string(limits.cpu_quota_us)), ctx);
    }
    if (limits.pids) VESSEL_TRY_CTX(writeKnob(d[2], "pids.max", std::to_string(limits.pids)), ctx);
    if (cfg.v1_blkio) {
      VESSEL_TRY_CTX(setIoV1(d[3], limits), ctx);
    } else if (!limits.io_max.empty()) {
      return Error(Code::kFailedPrecondition,
                   ctx + ": I/O limits asked for, no v1 blkio hierarchy");
    }
  }
  return cg;
}

Result<Cgroup> Cgroup::adopt(const CgroupConfig& cfg, const std::string& name) {
  auto dirs = dirsFor(cfg, name);
  for (const auto& d : dirs) {
    struct stat st {};
    if (::stat(d.c_str(), &st) != 0) return Error::fromErrno("adopt cgroup " + d);
  }
  return Cgroup(std::move(dirs));
}

std::vector<std::string> Cgroup::procsFiles() const {
  std::vector<std::string> out;
  for (const auto& d : dirs_) out.push_back(d + "/cgroup.procs");
  return out;
}

Result<bool> Cgroup::tryRemove() {
  std::vector<std::string> busy;
  std::optional<Error> failed;
  for (const auto& d : dirs_) {
    if (::rmdir(d.c_str()) == 0 || errno == ENOENT) continue;
    int e = errno;
    // A process that was just reaped can keep the group busy for a moment.
    if (e == EBUSY)
      busy.push_back(d);
    else if (!failed)
      failed = Error::fromErrno("rmdir " + d, e);
  }
  dirs_ = std::move(busy);
  if (failed) return *failed;
  return dirs_.empty();
}

namespace {
constexpr int kRemoveTries = 100;
constexpr auto kRemovePause = 10ms;
}  // namespace

// What is still busy after the last try is given up, as an error.
Status Cgroup::remove() {
  Status result = okStatus();
  for (int i = 0; i < kRemoveTries && !dirs_.empty(); ++i) {
    if (i > 0) std::this_thread::sleep_for(kRemovePause);
    auto r = tryRemove();
    if (!r.ok() && result.ok()) result = std::move(r).error();
  }
  if (!dirs_.empty() && result.ok()) result = Error::fromErrno("rmdir " + dirs_.front(), EBUSY);
  dirs_.clear();
  return result;
}

boost::asio::awaitable<Status> Cgroup::removeAsync() {
  namespace asio = boost::asio;
  Status result = okStatus();
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (int i = 0; i < kRemoveTries && !dirs_.empty(); ++i) {
    if (i > 0) {
      pause.expires_after(kRemovePause);
      boost::system::error_code ec;
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    auto r = tryRemove();
    if (!r.ok() && result.ok()) result = std::move(r).error();
  }
  if (!dirs_.empty() && result.ok()) result = Error::fromErrno("rmdir " + dirs_.front(), EBUSY);
  dirs_.clear();
  co_return result;
}

Result<std::optional<std::pair<uint32_t, uint32_t>>> blockDeviceOf(const std::string& path) {
  using Dev = std::optional<std::pair<uint32_t, uint32_t>>;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error::fromErrno("stat " + path);
  if (::major(st.st_dev) == 0) return Dev();  // anonymous: tmpfs, overlayfs, btrfs
  std::string sys = "/sys/dev/block/" + std::to_string(::major(st.st_dev)) + ":" +
                    std::to_string(::minor(st.st_dev));
  std::error_code ec;
  fs::path real = fs::canonical(sys, ec);
  if (ec) return Dev();  // not a block device the kernel lists (no throttling there)
  if (!exists((real / "partition").string())) return Dev({::major(st.st_dev), ::minor(st.st_dev)});
  // A partition: its disk is the directory above it in sysfs.
  auto dev = readFile((real.parent_path() / "dev").string(), 64);
  if (!dev.ok()) return std::move(dev).error().withContext("disk of " + path);
  uint32_t maj = 0, min = 0;
  if (std::sscanf(dev->c_str(), "%u:%u", &maj, &min) != 2)
    return Error(Code::kInternal, "disk of " + path + ": bad dev '" + *dev + "'");
  return Dev({maj, min});
}

size_t sweepCgroups(const CgroupConfig& cfg, const std::string& prefix) {
  size_t n = 0;
  for (const auto& h : hierarchies(cfg)) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(h + "/" + cfg.parent, ec)) {
      std::string name = e.path().filename().string();
      if (!e.is_directory(ec) || name.rfind(prefix, 0) != 0) continue;
      // rmdir fails (EBUSY) while any process is inside: live VMs stay.
      if (::rmdir(e.path().c_str()) == 0) ++n;
    }
  }
  return n;
}

}  // namespace vessel::os
