#include "volumes/disk.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/scope_exit.h"
#include "os/command.h"

namespace vessel::volumes {

namespace {

// The canonical form of an existing path (mountinfo names mount points so).
std::string canonical(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return path;
  return buf;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool octal = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = s[i + k];
        if (c < '0' || c > '7') octal = false;
        v = v * 8 + (c - '0');
      }
      if (octal) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// A free loop device attached to `image` with autoclear: the kernel
// detaches it once nothing holds it (the mount made next, or nothing if
// the process dies first). Two attachers racing for one free device: the
// loser gets EBUSY and asks again.
Result<std::pair<Fd, std::string>> attachLoop(const std::string& image, bool read_only) {
  const std::string ctx = "attach a loop device to " + image;
  auto backing = Fd::open(image, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (!backing.ok()) return std::move(backing).error().withContext(ctx);
  auto control = Fd::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (!control.ok()) return std::move(control).error().withContext(ctx);
  for (int attempt = 0; attempt < 16; ++attempt) {
    int n = ::ioctl(control->get(), LOOP_CTL_GET_FREE);
    if (n < 0) return Error::fromErrno(ctx + ": LOOP_CTL_GET_FREE");
    std::string dev = "/dev/loop" + std::to_string(n);
    auto loop = Fd::open(dev, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (!loop.ok()) return std::move(loop).error().withContext(ctx);
    loop_config cfg{};
    cfg.fd = static_cast<uint32_t>(backing->get());
    cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | (read_only ? LO_FLAGS_READ_ONLY : 0);
    std::strncpy(reinterpret_cast<char*>(cfg.info.lo_file_name), image.c_str(), LO_NAME_SIZE - 1);
    if (::ioctl(loop->get(), LOOP_CONFIGURE, &cfg) == 0)
      return std::make_pair(std::move(*loop), dev);
    if (errno != EBUSY) return Error::fromErrno(ctx + ": LOOP_CONFIGURE " + dev);
  }
  return Error(Code::kUnavailable, ctx + ": every free loop device was taken first");
}

}  // namespace

Status makeImage(const std::string& mkfs, const std::string& path, uint64_t size_mib) {
  const std::string ctx = "make volume image " + path;
  {
    auto f = Fd::open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (!f.ok()) return std::move(f).error().withContext(ctx);
    if (::ftruncate(f->get(), static_cast<off_t>(size_mib << 20)) != 0) {
      Error e = Error::fromErrno(ctx + ": truncate");
      ::unlink(path.c_str());
      return e;
    }
  }
  ScopeExit drop([&] { ::unlink(path.c_str()); });
  // -m 0: a volume's size is all its users'; the root 0:0 0755 as a
  // directory a guest's root may hand out; the journal stays (a host crash
  // loses nothing synced).
  auto r = os::runCommand({mkfs, "-q", "-F", "-m", "0", "-b", "4096", "-L", "vessel-volume", "-E",
                           "root_owner=0:0", path},
                          {}, std::chrono::minutes(5));
  if (!r.ok()) return std::move(r).error().withContext(ctx);
  if (::chmod(path.c_str(), 0600) != 0) return Error::fromErrno(ctx + ": chmod");
  drop.dismiss();
  return okStatus();
}

Result<FrozenFs> FrozenFs::freeze(const std::string& mount_dir) {
  auto d = Fd::open(mount_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (!d.ok()) return std::move(d).error().withContext("freeze " + mount_dir);
  if (::ioctl(d->get(), FIFREEZE, 0) != 0) return Error::fromErrno("freeze " + mount_dir);
  return FrozenFs(std::move(*d));
}

FrozenFs::~FrozenFs() {
  if (dir_.valid()) (void)::ioctl(dir_.get(), FITHAW, 0);
}

Result<FsUsage> fsUsage(const std::string& mount_dir) {
  struct statvfs s {};
  if (::statvfs(mount_dir.c_str(), &s) != 0) return Error::fromErrno("statfs " + mount_dir);
  FsUsage u;
  u.total_bytes = static_cast<uint64_t>(s.f_blocks) * s.f_frsize;
  u.free_bytes = static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
  u.used_bytes = static_cast<uint64_t>(s.f_blocks - s.f_bfree) * s.f_frsize;
  return u;
}

Result<std::string> mountedDevice(const std::string& dir) {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return Error::fromErrno("read /proc/self/mountinfo");
  const std::string want = canonical(dir);
  std::string line, found;
  // The last line for the mount point is the mount on top.
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    if (!(f >> id >> parent >> dev >> root >> point)) continue;
    if (unescape(point) == want) found = dev;
  }
  return found;
}

std::string loopBackingFile(const std::string& dev) {
  std::ifstream in("/sys/dev/block/" + dev + "/loop/backing_file");
  std::string path;
  if (!in || !std::getline(in, path)) return "";
  return path;
}

Result<MountedImage> MountedImage::mount(const std::string& image, const std::string& dir,
                                         bool read_only) {
  const std::string ctx = "mount volume " + image + " at " + dir;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Error::fromErrno(ctx + ": mkdir");
  VESSEL_ASSIGN_OR_RETURN(std::string dev, mountedDevice(dir));
  if (!dev.empty()) {
    std::string backing = loopBackingFile(dev);
    if (backing != canonical(image))
      return Error(Code::kFailedPrecondition,
                   ctx + ": another filesystem (" + dev + ", " +
                       (backing.empty() ? std::string("no loop file") : backing) +
                       ") is mounted there");
    return MountedImage(image, dir, read_only, true);
  }
  VESSEL_ASSIGN_OR_RETURN(auto loop, attachLoop(canonical(image), read_only));
  unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME;
  if (read_only) flags |= MS_RDONLY;
  if (::mount(loop.second.c_str(), dir.c_str(), "ext4", flags, "errors=remount-ro") != 0)
    // Closing the loop fd (autoclear) detaches it: nothing is left.
    return Error::fromErrno(ctx + ": mount " + loop.second);
  return MountedImage(image, dir, read_only, false);
}

MountedImage::MountedImage(MountedImage&& o) noexcept
    : image_(std::move(o.image_)),
      dir_(std::move(o.dir_)),
      read_only_(o.read_only_),
      adopted_(o.adopted_) {
  o.dir_.clear();
}

MountedImage& MountedImage::operator=(MountedImage&& o) noexcept {
  if (this != &o) {
    (void)unmount();
    image_ = std::move(o.image_);
    dir_ = std::move(o.dir_);
    read_only_ = o.read_only_;
    adopted_ = o.adopted_;
    o.dir_.clear();
  }
  return *this;
}

MountedImage::~MountedImage() { (void)unmount(); }

Status MountedImage::unmount() {
  if (dir_.empty()) return okStatus();
  std::string dir = std::move(dir_);
  dir_.clear();
  if (::umount2(dir.c_str(), UMOUNT_NOFOLLOW) == 0) return okStatus();
  if (errno == EINVAL) return okStatus();  // not mounted (any more)
  if (errno == EBUSY) {
    // A file still open (a download in flight): detached now, gone with it.
    if (::umount2(dir.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) return okStatus();
  }
  return Error::fromErrno("unmount volume at " + dir);
}

}  // namespace vessel::volumes
