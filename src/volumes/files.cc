#include "volumes/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

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
  f.mtime_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
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

Result<std::vector<FileInfo>> VolumeFiles::list(std::string_view path) const {
  VESSEL_ASSIGN_OR_RETURN(std::string rel, relativePath(path));
  VESSEL_ASSIGN_OR_RETURN(FileInfo self, stat(path));
  if (self.type != "dir") return std::vector<FileInfo>{std::move(self)};
  VESSEL_ASSIGN_OR_RETURN(Fd dir, beneath(root_.get(), rel, O_RDONLY | O_DIRECTORY));
  int dup = ::fcntl(dir.get(), F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return fileError("list " + shown(rel));
  DIR* d = ::fdopendir(dup);
  if (!d) {
    ::close(dup);
    return fileError("list " + shown(rel));
  }
  ScopeExit close([d] { ::closedir(d); });
  std::vector<FileInfo> out;
  const std::string base = rel == "." ? "" : "/" + rel;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (out.size() >= kMaxListEntries)
      return Error(Code::kResourceExhausted, "list " + shown(rel) + ": more than " +
                                                 std::to_string(kMaxListEntries) + " entries");
    auto f = statAt(dir.get(), n, base + "/" + n);
    if (f.ok()) out.push_back(std::move(*f));  // one removed meanwhile is left out
  }
  std::sort(out.begin(), out.end(),
            [](const FileInfo& a, const FileInfo& b) { return a.name < b.name; });
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
  VESSEL_TRY(writable("write", path));
  VESSEL_ASSIGN_OR_RETURN(std::string rel, relativePath(path));
  VESSEL_ASSIGN_OR_RETURN(auto parent, parentOf(rel));
  struct stat st {};
  if (::fstatat(parent.first.get(), parent.second.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISDIR(st.st_mode))
    return Error(Code::kInvalidArgument, "write " + shown(rel) + ": is a directory");
  std::string tmp = ".vessel-write" + newId("");
  int fd = ::openat(parent.first.get(), tmp.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return fileError("write " + shown(rel));
  Fd file(fd);
  if (::fchmod(file.get(), static_cast<mode_t>(mode & 0777)) != 0) {
    Error e = fileError("write " + shown(rel));
    ::unlinkat(parent.first.get(), tmp.c_str(), 0);
    return e;
  }
  return Write(std::move(parent.first), std::move(file), std::move(tmp), std::move(parent.second),
               shown(rel));
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
  if (::renameat(dir_.get(), tmp_.c_str(), dir_.get(), name_.c_str()) != 0)
    return fileError("write " + path_);
  tmp_.clear();
  (void)::fsync(dir_.get());
  struct stat st {};
  if (::fstat(file_.get(), &st) != 0) return fileError("write " + path_);
  return infoOf(st, name_, path_);
}

}  // namespace vessel::volumes
