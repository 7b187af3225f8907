#include "os/cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
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
  return {cfg.fs_root + "/memory", cfg.fs_root + "/cpu", cfg.fs_root + "/pids"};
}

}  // namespace

Result<CgroupConfig> detectCgroups(std::string fs_root, std::string parent) {
  struct statfs st {};
  if (::statfs(fs_root.c_str(), &st) != 0) return Error::fromErrno("statfs " + fs_root);
  CgroupConfig c{fs_root, parent, st.f_type == CGROUP2_SUPER_MAGIC};
  if (!c.unified) {
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
      (void)writeKnob(h, "cgroup.subtree_control", "+memory +cpu +pids");
      VESSEL_TRY_CTX(writeKnob(parent, "cgroup.subtree_control", "+memory +cpu +pids"), ctx);
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
  } else {
    if (limits.memory_bytes)
      VESSEL_TRY_CTX(writeKnob(d[0], "memory.limit_in_bytes", std::to_string(limits.memory_bytes)),
                     ctx);
    if (limits.cpu_quota_us) {
      VESSEL_TRY_CTX(writeKnob(d[1], "cpu.cfs_period_us", "100000"), ctx);
      VESSEL_TRY_CTX(writeKnob(d[1], "cpu.cfs_quota_us", std::to_string(limits.cpu_quota_us)), ctx);
    }
    if (limits.pids) VESSEL_TRY_CTX(writeKnob(d[2], "pids.max", std::to_string(limits.pids)), ctx);
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
