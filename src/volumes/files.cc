#include "volumes/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "base/new_id.h"
#include "base/scope_exit.h"

namespace vessel::volumes {

namespace {

constexpr int kMaxDepth = 256;  // nesting a recursive remove descends

// errno to the code the API answers with, for a file call.
Error fileError(const std::string& what, int e = errno) {
  switch (e) {
    case EXDEV: return Error(Code::kInvalidArgument, what + ": leads outside the volume", e);
    case ELOOP: return Error(Code::kInvalidArgument, what + ": too many symbolic links", e);
    case ENOTDIR: return Error(Code::kInvalidArgument, what + ": not a directory", e);
    case EISDIR: return Error(Code::kInvalidArgument, what + ": is a directory", e);
    case ENAMETOOLONG: return Error(Code::kInvalidArgument, what + ": name too long", e);
    case ENOTEMPTY:
      return Error(Code::kFailedPrecondition, what + ": directory not empty (recursive=true)", e);
    case EROFS: return Error(Code::kFailedPrecondition, what + ": the volume is read-only", e);
    case EDQUOT:
    case ENOSPC: return Error(Code::kResourceExhausted, what + ": the volume is full", e);
    default: return Error::fromErrno(what, e);
  }
}

std::string shown(const std::string& rel) { return rel == "." ? "/" : "/" + rel; }

// openat2 beneath `dirfd`: no escape by "..", symlinks (absolute or
// relative), magic links or another mount.
Result<Fd> beneath(int dirfd, const std::string& rel, uint64_t flags, uint64_t mode = 0) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  for (int i = 0; i < 8; ++i) {
    long fd = ::syscall(SYS_openat2, dirfd, rel.c_str(), &how, sizeof how);
    if (fd >= 0) return Fd(static_cast<int>(fd));
    if (errno != EAGAIN && errno != EINTR) break;  // EAGAIN: a rename raced the lookup
  }
  return fileError("open " + shown(rel));
}

std::string typeOf(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "symlink";
  return "other";
}

FileInfo infoOf(const struct stat& st, std::string name, std::string path) {
  FileInfo f;
  f.name = std::move(name);
  f.path = std::move(path);
  f.type = typeOf(st.st_mode);
  f.size = static_cast<uint64_t>(st.st_size);
  f.mode = st.st_mode & 07777;
  f.uid = st.st_uid;
  f.gid = st.st_gid;
  auto ms = [](const timespec& t) {
    return static_cast<int64_t>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
  };
  f.mtime_ms = ms(st.st_mtim);
  f.atime_ms = ms(st.st_atim);
  f.ctime_ms = ms(st.st_ctim);
  return f;
}

// `name` in directory `dir`, never following it.
Result<FileInfo> statAt(int dir, const std::string& name, const std::string& path) {
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return fileError("stat " + path);
  FileInfo f = infoOf(st, name, path);
  if (S_ISLNK(st.st_mode)) {
    char buf[4096];
    ssize_t n = ::readlinkat(dir, name.c_str(), buf, sizeof buf);
    if (n > 0) f.target.assign(buf, static_cast<size_t>(n));
  }
  return f;
}

// The names in directory `fd`, sorted, "." and ".." left out.
Result<std::vector<std::string>> namesIn(int fd, const std::string& path) {
  int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return fileError("list " + path);
  DIR* d = ::fdopendir(dup);
  if (!d) {
    ::close(dup);
    return fileError("list " + path);
  }
  ScopeExit close([d] { ::closedir(d); });
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (names.size() >= kMaxListEntries)
      return Error(Code::kResourceExhausted,
                   "list " + path + ": more than " + std::to_string(kMaxListEntries) + " entries");
    names.push_back(std::move(n));
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Appends the entries of directory `fd` (shown as `base`, "" for the root)
// to `out`, each subdirectory's after it while `depth` > 1: opened
// O_NOFOLLOW from its parent's fd, on the root's filesystem only, so a
// link is listed and never descended into.
Status listInto(int fd, dev_t dev, const std::string& base, int depth, std::vector<FileInfo>& out) {
  VESSEL_ASSIGN_OR_RETURN(auto names, namesIn(fd, base.empty() ? "/" : base));
  for (const auto& n : names) {
    auto f = statAt(fd, n, base + "/" + n);
    if (!f.ok()) continue;  // one removed meanwhile is left out
    if (out.size() >= kMaxListEntries)
      return Error(Code::kResourceExhausted, "list " + (base.empty() ? "/" : base) +
                                                 ": more than " + std::to_string(kMaxListEntries) +
                                                 " entries");
    const bool descend = depth > 1 && f->type == "dir";
    std::string path = f->path;
    out.push_back(std::move(*f));
    if (!descend) continue;
    int sub = ::openat(fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) continue;  // replaced or removed meanwhile
    Fd owned(sub);
    struct stat st {};
    if (::fstat(owned.get(), &st) != 0 || st.st_dev != dev) continue;
    VESSEL_TRY(listInto(owned.get(), dev, path, depth - 1, out));
  }
  return okStatus();
}

// Empties directory `fd` (opened O_NOFOLLOW), depth first, never following
// a link and never leaving its filesystem.
Status removeTree(int fd, dev_t dev, const std::string& path, int depth) {
  if (depth > kMaxDepth) return Error(Code::kInvalidArgument, "remove " + path + ": too deep");
  int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return fileError("remove " + path);
  DIR* d = ::fdopendir(dup);
  if (!d) {
    ::close(dup);
    return fileError("remove " + path);
  }
  ScopeExit close([d] { ::closedir(d); });
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  for (const auto& n : names) {
    const std::string p = path + "/" + n;
    struct stat st {};
    if (::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return fileError("remove " + p);
    if (st.st_dev != dev) return Error(Code::kInvalidArgument, "remove " + p + ": another mount");
    if (S_ISDIR(st.st_mode)) {
      int sub = ::openat(fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) return fileError("remove " + p);
      Fd owned(sub);
      VESSEL_TRY(removeTree(owned.get(), dev, p, depth + 1));
      if (::unlinkat(fd, n.c_str(), AT_REMOVEDIR) != 0) return fileError("remove " + p);
    } else if (::unlinkat(fd, n.c_str(), 0) != 0) {
      return fileError("remove " + p);
    }
  }
  return okStatus();
}

}  // namespace

Result<std::string> relativePath(std::string_view path) {
  if (path.size() > 4096) return Error(Code::kInvalidArgument, "path longer than 4096 bytes");
  if (path.find('\0') != std::string_view::npos)
    return Error(Code::kInvalidArgument, "path holds a NUL byte");
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view c = path.substr(i, j - i);
    if (c == "..") {
      if (parts.empty())
        return Error(Code::kInvalidArgument, "path " + std::string(path) + " leads outside");
      parts.pop_back();
    } else if (!c.empty() && c != ".") {
      if (c.size() > 255) return Error(Code::kInvalidArgument, "a path component over 255 bytes");
      parts.push_back(c);
    }
    i = j + 1;
  }
  if (parts.empty()) return std::string(".");
  std::string out;
  for (auto c : parts) {
    if (!out.empty()) out.push_back('/');
    out.append(c);
  }
  return out;
}

Result<VolumeFiles> VolumeFiles::open(const std::string& root_dir, bool read_only) {
  auto fd = Fd::open(root_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (!fd.ok()) return std::move(fd).error().withContext("open volume root");
  return VolumeFiles(std::move(*fd), read_only);
}

Status VolumeFiles::writable(std::string_view what, std::string_view path) const {
  if (read_only_)
    return Error(Code::kFailedPrecondition,
                 std::string(what) + " " + std::string(path) +
                     ": the volume is read-only (a snapshot); clone it to change it");
  return okStatus();
}

Result<std::pair<Fd, std::string>> VolumeFiles::parentOf(const std::string& rel) const {
  if (rel == ".") return Error(Code::kInvalidArgument, "the volume root has no parent");
  auto slash = rel.rfind('/');
  std::string dir = slash == std::string::npos ? "." : rel.substr(0, slash);
  std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
  VESSEL_ASSIGN_OR_RETURN(Fd d, beneath(root_.get(), dir, O_RDONLY | O_DIRECTORY));
  return std::make_pair(std::move(d), std::move(name));
}

Result<FileInfo> VolumeFiles::stat(std::string_view path) const {
  VESSEL_ASSIGN_OR_RETURN(std::string rel, relativePath(path));
  if (rel == ".") {
    struct stat st {};
    if (::fstat(root_.get(), &st) != 0) return fileError("stat /");
    return infoOf(st, "", "/");
  }
  VESSEL_ASSIGN_OR_RETURN(auto parent, parentOf(rel));
  return statAt(parent.first.get(), parent.second, shown(rel));
}

Result<std::vector<FileInfo>> VolumeFiles::list(std::string_view path, int depth) const {
  if (depth < 1 || depth > kMaxListDepth)
    return Error(Code::kInvalidArgument,
                 "list depth: 1 to " + std::to_string(kMaxListDepth) + " levels");
  VESSEL_ASSIGN_OR_RETURN(std::string rel, relativePath(path));
  VESSEL_ASSIGN_OR_RETURN(FileInfo self, stat(path));
  if (self.type != "dir") return std::vector<FileInfo>{std::move(self)};
  VESSEL_ASSIGN_OR_RETURN(Fd dir, beneath(root_.get(), rel, O_RDONLY | O_DIRECTORY));
  struct stat root {};
  if (::fstat(root_.get(), &root) != 0) return fileError("list " + shown(rel));
  std::vector<FileInfo> out;
  VESSEL_TRY(listInto(dir.get(), root.st_dev, rel == "." ? "" : "/" + rel, depth, out));
  return out;
}

Result<Fd> VolumeFiles::openRead(std::string_view path) const {
  VESSEL_ASSIGN_OR_RETURN(std::string rel, relativePath(path));
  // O_NONBLOCK: a FIFO a guest left must not hold the reader.
  VESSEL_ASSIGN_OR_RETURN(Fd f, beneath(root_.get(), rel, O_RDONLY | O_NONBLOCK));
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) return fileError("read " + shown(rel));
  if (!S_ISREG(st.st_mode))
    return Error(Code::kInvalidArgument, "read " + shown(rel) + ": not a regular file");
  int fl = ::fcntl(f.get(), F_GETFL);
  if (fl < 0 || ::fcntl(f.get(), F_SETFL, fl & ~O_NONBLOCK) != 0)
    return fileError("read " + shown(rel));
  return f;
}

Status VolumeFiles::mkdir(std::string_view path, uint32_t mode, bool parents) const {
  VESSEL_TRY(writable("mkdir", path));
  VESSEL_ASSIGN_OR_RETURN(std::string rel, relativePath(path));
  if (rel == ".") return parents ? okStatus() : Error(Code::kAlreadyExists, "mkdir /: exists");
  const mode_t m = static_cast<mode_t>(mode & 0777);
  if (!parents) {
    VESSEL_ASSIGN_OR_RETURN(auto parent, parentOf(rel));
    if (::mkdirat(parent.first.get(), parent.second.c_str(), m) != 0)
      return fileError("mkdir " + shown(rel));
    return okStatus();
  }
  // Each level beneath the root in turn, so a link on the way is resolved
  // as beneath() allows and no further.
  size_t pos = 0;
  for (;;) {
    size_t slash = rel.find('/', pos);
    std::string prefix = rel.substr(0, slash);
    VESSEL_ASSIGN_OR_RETURN(auto parent, parentOf(prefix));
    if (::mkdirat(parent.first.get(), parent.second.c_str(), m) != 0 && errno != EEXIST)
      return fileError("mkdir " + shown(prefix));
    VESSEL_TRY(beneath(root_.get(), prefix, O_PATH | O_DIRECTORY));  // a directory by now
    if (slash == std::string::npos) return okStatus();
    pos = slash + 1;
  }
}

Result<FileInfo> VolumeFiles::setAttributes(std::string_view path, const Attributes& a) const {
  VESSEL_TRY(writable("change", path));
  VESSEL_ASSIGN_OR_RETURN(std::string rel, relativePath(path));
  if (a.mode && *a.mode > 07777)
    return Error(Code::kInvalidArgument, "mode: permission bits, at most 07777");
  constexpr uint32_t kNoId = static_cast<uint32_t>(-1);  // chown's "leave it"
  if ((a.uid && *a.uid == kNoId) || (a.gid && *a.gid == kNoId))
    return Error(Code::kInvalidArgument, "uid and gid: at most 4294967294");
  // The object itself, beneath the root; a link at the end is the link.
  VESSEL_ASSIGN_OR_RETURN(Fd f, beneath(root_.get(), rel, O_PATH | O_NOFOLLOW));
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) return fileError("change " + shown(rel));
  if (S_ISLNK(st.st_mode) && a.mode)
    return Error(Code::kInvalidArgument,
                 "change " + shown(rel) + ": a symbolic link has no mode of its own");
  // The owner first: chown clears set-user-ID bits a mode may then set.
  if ((a.uid || a.gid) &&
      ::fchownat(f.get(), "", a.uid.value_or(kNoId), a.gid.value_or(kNoId), AT_EMPTY_PATH) != 0)
    return fileError("chown " + shown(rel));
  // fchmod refuses an O_PATH fd; its /proc link names the same inode, so
  // nothing is looked up again by name.
  if (a.mode) {
    std::string self = "/proc/self/fd/" + std::to_string(f.get());
    if (::chmod(self.c_str(), static_cast<mode_t>(*a.mode)) != 0)
      return fileError("chmod " + shown(rel));
  }
  return stat(path);
}

Status VolumeFiles::remove(std::string_view path, bool recursive) const {
  VESSEL_TRY(writable("remove", path));
  VESSEL_ASSIGN_OR_RETURN(std::string rel, relativePath(path));
  if (rel == ".") return Error(Code::kInvalidArgument, "the volume root cannot be removed");
  VESSEL_ASSIGN_OR_RETURN(auto parent, parentOf(rel));
  const int pd = parent.first.get();
  const char* name = parent.second.c_str();
  struct stat st {};
  if (::fstatat(pd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return fileError("remove " + shown(rel));
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(pd, name, 0) != 0) return fileError("remove " + shown(rel));
    return okStatus();
  }
  if (recursive) {
    int sub = ::openat(pd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) return fileError("remove " + shown(rel));
    Fd owned(sub);
    VESSEL_TRY(removeTree(owned.get(), st.st_dev, shown(rel), 0));
  }
  if (::unlinkat(pd, name, AT_REMOVEDIR) != 0) return fileError("remove " + shown(rel));
  return okStatus();
}

Result<VolumeFiles::Write> VolumeFiles::write(std::string_view path, uint32_t mode) const {
  WriteOptions o;
  o.mode = mode;
  return write(path, o);
}

Result<VolumeFiles::Write> VolumeFiles::write(std::string_view path, const WriteOptions& o) const {
  VESSEL_TRY(writable("write", path));
  VESSEL_ASSIGN_OR_RETURN(std::string rel, relativePath(path));
  VESSEL_ASSIGN_OR_RETURN(auto parent, parentOf(rel));
  struct stat st {};
  if (::fstatat(parent.first.get(), parent.second.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode))
      return Error(Code::kInvalidArgument, "write " + shown(rel) + ": is a directory");
    if (!o.replace) return Error(Code::kAlreadyExists, "write " + shown(rel) + ": exists");
  }
  constexpr uint32_t kNoId = static_cast<uint32_t>(-1);
  if ((o.uid && *o.uid == kNoId) || (o.gid && *o.gid == kNoId))
    return Error(Code::kInvalidArgument, "uid and gid: at most 4294967294");
  std::string tmp = ".vessel-write" + newId("");
  int fd = ::openat(parent.first.get(), tmp.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return fileError("write " + shown(rel));
  Fd file(fd);
  // Owner, then mode (chown clears set-user-ID bits), on the new file's fd.
  bool set =
      (!o.uid && !o.gid) || ::fchown(file.get(), o.uid.value_or(kNoId), o.gid.value_or(kNoId)) == 0;
  set = set && ::fchmod(file.get(), static_cast<mode_t>(o.mode & 07777)) == 0;
  if (!set) {
    Error e = fileError("write " + shown(rel));
    ::unlinkat(parent.first.get(), tmp.c_str(), 0);
    return e;
  }
  return Write(std::move(parent.first), std::move(file), std::move(tmp), std::move(parent.second),
               shown(rel), o.replace);
}

VolumeFiles::Write::~Write() {
  if (dir_.valid() && !tmp_.empty()) ::unlinkat(dir_.get(), tmp_.c_str(), 0);
}

Status VolumeFiles::Write::append(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(file_.get(), data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fileError("write " + path_);
    }
    written_ += static_cast<uint64_t>(n);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return okStatus();
}

Result<FileInfo> VolumeFiles::Write::commit() {
  // Durable before it replaces anything: a crash leaves the old file or
  // the whole new one.
  if (::fsync(file_.get()) != 0) return fileError("write " + path_);
  // Not replacing: RENAME_NOREPLACE fails (EEXIST) on a file made meanwhile.
  const unsigned flags = replace_ ? 0 : RENAME_NOREPLACE;
  if (::renameat2(dir_.get(), tmp_.c_str(), dir_.get(), name_.c_str(), flags) != 0)
    return fileError("write " + path_);
  tmp_.clear();
  (void)::fsync(dir_.get());
  struct stat st {};
  if (::fstat(file_.get(), &st) != 0) return fileError("write " + path_);
  return infoOf(st, name_, path_);
}

}  // namespace vessel::volumes
