#include "volumes/volume_host.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/scope_exit.h"
#include "base/sparse_copy.h"

namespace vessel::volumes {

namespace {

constexpr const char* kImageSuffix = ".img";

Status makeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    return Error::fromErrno("make directory " + path);
  if (::chmod(path.c_str(), 0700) != 0) return Error::fromErrno("chmod " + path);
  return okStatus();
}

}  // namespace

bool validVolumeId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

Result<std::unique_ptr<VolumeHost>> VolumeHost::open(HostOptions o) {
  for (const auto& d : {o.dir, o.dir + "/images", o.dir + "/mnt", o.dir + "/orphans"})
    VESSEL_TRY_CTX(makeDir(d), "open the volume directory");
  // A copy cut short by a kill: never installed, nobody's.
  if (DIR* d = ::opendir((o.dir + "/images").c_str())) {
    ScopeExit close([d] { ::closedir(d); });
    const std::string part = std::string(kImageSuffix) + ".part";
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > part.size() && n.compare(n.size() - part.size(), part.size(), part) == 0)
        ::unlinkat(::dirfd(d), n.c_str(), 0);
    }
  }
  return std::unique_ptr<VolumeHost>(new VolumeHost(std::move(o)));
}

VolumeHost::~VolumeHost() {
  std::lock_guard lock(mu_);
  mounts_.clear();  // each unmounts
}

std::string VolumeHost::imagePath(const std::string& id) const {
  return o_.dir + "/images/" + id + kImageSuffix;
}

std::string VolumeHost::mountDir(const std::string& id) const { return o_.dir + "/mnt/" + id; }

std::shared_ptr<MountedImage> VolumeHost::find(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = mounts_.find(id);
  return it == mounts_.end() ? nullptr : it->second;
}

Status VolumeHost::mountAs(const std::string& id, bool read_only) {
  VESSEL_ASSIGN_OR_RETURN(auto m, MountedImage::mount(imagePath(id), mountDir(id), read_only));
  std::lock_guard lock(mu_);
  mounts_[id] = std::make_shared<MountedImage>(std::move(m));
  return okStatus();
}

Status VolumeHost::create(const std::string& id, uint64_t size_mib) {
  if (!validVolumeId(id)) return Error(Code::kInvalidArgument, "bad volume id: " + id);
  const std::string ctx = "create volume " + id;
  VESSEL_TRY_CTX(makeImage(o_.mkfs, imagePath(id), size_mib), ctx);
  ScopeExit drop([&] { ::unlink(imagePath(id).c_str()); });
  VESSEL_TRY_CTX(mountAs(id, false), ctx);
  drop.dismiss();
  return okStatus();
}

Status VolumeHost::restore(const std::string& id, bool read_only) {
  if (!validVolumeId(id)) return Error(Code::kInvalidArgument, "bad volume id: " + id);
  if (find(id)) return okStatus();
  struct stat st {};
  if (::stat(imagePath(id).c_str(), &st) != 0)
    return Error::fromErrno("restore volume " + id + ": its image " + imagePath(id));
  VESSEL_TRY_CTX(mountAs(id, read_only), "restore volume " + id);
  return okStatus();
}

Status VolumeHost::copy(const std::string& from, const std::string& to, bool read_only) {
  if (!validVolumeId(from) || !validVolumeId(to))
    return Error(Code::kInvalidArgument, "bad volume id: " + from + " or " + to);
  const std::string ctx = "copy volume " + from + " to " + to;
  auto src = find(from);
  if (!src) return Error(Code::kUnavailable, ctx + ": " + from + " is not mounted");
  const std::string tmp = imagePath(to) + ".part";
  ScopeExit drop_tmp([&] { ::unlink(tmp.c_str()); });
  {
    // Writers wait while the image is copied; thawed whatever happens.
    VESSEL_ASSIGN_OR_RETURN(auto frozen, FrozenFs::freeze(src->dir()));
    VESSEL_TRY_CTX(copySparse(src->image(), tmp, 0600), ctx);
  }
  if (::link(tmp.c_str(), imagePath(to).c_str()) != 0)
    return Error::fromErrno(ctx + ": install " + imagePath(to));
  ScopeExit drop([&] { ::unlink(imagePath(to).c_str()); });
  VESSEL_TRY_CTX(mountAs(to, read_only), ctx);
  drop.dismiss();
  return okStatus();
}

Status VolumeHost::remove(const std::string& id) {
  if (!validVolumeId(id)) return Error(Code::kInvalidArgument, "bad volume id: " + id);
  const std::string ctx = "remove volume " + id;
  std::shared_ptr<MountedImage> m;
  {
    std::lock_guard lock(mu_);
    auto it = mounts_.find(id);
    if (it != mounts_.end()) {
      m = std::move(it->second);
      mounts_.erase(it);
    }
  }
  if (m) VESSEL_TRY_CTX(m->unmount(), ctx);
  // One left by a vesseld that was killed before restoring it.
  VESSEL_ASSIGN_OR_RETURN(std::string dev, mountedDevice(mountDir(id)));
  if (!dev.empty()) {
    VESSEL_ASSIGN_OR_RETURN(auto left, MountedImage::mount(imagePath(id), mountDir(id), false));
    VESSEL_TRY_CTX(left.unmount(), ctx);
  }
  if (::unlink(imagePath(id).c_str()) != 0 && errno != ENOENT)
    return Error::fromErrno(ctx + ": delete its image");
  if (::rmdir(mountDir(id).c_str()) != 0 && errno != ENOENT)
    return Error::fromErrno(ctx + ": remove " + mountDir(id));
  return okStatus();
}

Status VolumeHost::setAside(const std::string& id) {
  if (!validVolumeId(id)) return Error(Code::kInvalidArgument, "bad volume id: " + id);
  const std::string ctx = "set aside volume image " + id;
  {
    std::lock_guard lock(mu_);
    if (mounts_.count(id)) return Error(Code::kFailedPrecondition, ctx + ": it is in use");
  }
  // Mounted by a vesseld killed before it was recorded as gone.
  VESSEL_ASSIGN_OR_RETURN(std::string dev, mountedDevice(mountDir(id)));
  if (!dev.empty()) {
    VESSEL_ASSIGN_OR_RETURN(auto left, MountedImage::mount(imagePath(id), mountDir(id), false));
    VESSEL_TRY_CTX(left.unmount(), ctx);
  }
  const std::string to = o_.dir + "/orphans/" + id + kImageSuffix;
  if (::rename(imagePath(id).c_str(), to.c_str()) != 0) return Error::fromErrno(ctx + ": to " + to);
  if (::rmdir(mountDir(id).c_str()) != 0 && errno != ENOENT)
    return Error::fromErrno(ctx + ": remove " + mountDir(id));
  return okStatus();
}

Result<std::string> VolumeHost::root(const std::string& id) const {
  auto m = find(id);
  if (!m) return Error(Code::kUnavailable, "volume " + id + " is not mounted on this machine");
  return m->dir();
}

Result<FsUsage> VolumeHost::usage(const std::string& id) const {
  VESSEL_ASSIGN_OR_RETURN(std::string dir, root(id));
  return fsUsage(dir);
}

std::vector<std::string> VolumeHost::imageIds() const {
  std::vector<std::string> out;
  DIR* d = ::opendir((o_.dir + "/images").c_str());
  if (!d) return out;
  ScopeExit close([d] { ::closedir(d); });
  const std::string sfx = kImageSuffix;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() <= sfx.size() || n.compare(n.size() - sfx.size(), sfx.size(), sfx) != 0) continue;
    std::string id = n.substr(0, n.size() - sfx.size());
    if (validVolumeId(id)) out.push_back(id);
  }
  return out;
}

}  // namespace vessel::volumes
