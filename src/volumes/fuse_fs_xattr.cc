// PassthroughFs: extended attributes (docs/design.md, "Volumes"). Only the
// user namespace, the one an unprivileged process owns: "trusted.",
// "security." and "system." names are the host's (file capabilities, ACLs,
// labels) and none is ever read or written through a volume, whatever the
// guest's kernel lets its root ask. user.* attributes exist on files and
// directories only, as on Linux. Each call goes through a reopened fd of
// the inode (an O_PATH fd takes none), so no link is ever followed.
#include <errno.h>
#include <fcntl.h>
#include <linux/limits.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "volumes/fuse_fs.h"
#include "volumes/fuse_fs_internal.h"

namespace vessel::volumes::fs_ops {

namespace {

enum class Space { kUser, kHost, kUnknown };

Space spaceOf(std::string_view name) {
  if (name.starts_with("user.")) return Space::kUser;
  if (name.starts_with("trusted.") || name.starts_with("security.") || name.starts_with("system."))
    return Space::kHost;
  return Space::kUnknown;
}

// What Linux answers a name of no byte or over XATTR_NAME_MAX: ERANGE.
int checkName(const char* name) {
  size_t n = ::strnlen(name, XATTR_NAME_MAX + 1);
  return n == 0 || n > XATTR_NAME_MAX ? ERANGE : 0;
}

bool holdsUserAttrs(const PassthroughFs::Inode& i) { return S_ISREG(i.type) || S_ISDIR(i.type); }

// The inode's file opened to read (never to write: attributes need no
// write access), or an errno.
int openFor(PassthroughFs& fs, const PassthroughFs::Inode& i, Fd& out) {
  int flags = O_RDONLY | O_NONBLOCK | (S_ISDIR(i.type) ? O_DIRECTORY : 0);
  out.reset(fs.reopen(i, flags));
  return out ? 0 : errno;
}

// The checks shared by set and remove: 0, or the errno to answer.
int checkChange(PassthroughFs& fs, const PassthroughFs::Inode& i, const char* name) {
  if (int e = checkName(name)) return e;
  if (fs.readOnly()) return EROFS;
  switch (spaceOf(name)) {
    case Space::kUnknown: return EOPNOTSUPP;
    case Space::kHost: return EPERM;  // as to a process without CAP_SYS_ADMIN
    case Space::kUser: break;
  }
  return holdsUserAttrs(i) ? 0 : EPERM;  // Linux: not on links, FIFOs, sockets
}

}  // namespace

void getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  auto& fs = fsOf(req);
  auto* i = fs.inode(ino);
  if (!i) return (void)fuse_reply_err(req, ESTALE);
  if (int e = checkName(name)) return (void)fuse_reply_err(req, e);
  switch (spaceOf(name)) {
    case Space::kUnknown: return (void)fuse_reply_err(req, EOPNOTSUPP);
    // Absent, as trusted.* is to an unprivileged reader. The guest's
    // kernel asks for security.capability before each write(2): answered
    // here without touching the file.
    case Space::kHost: return (void)fuse_reply_err(req, ENODATA);
    case Space::kUser: break;
  }
  if (!holdsUserAttrs(*i)) return (void)fuse_reply_err(req, ENODATA);
  Fd fd;
  if (int e = openFor(fs, *i, fd)) return (void)fuse_reply_err(req, e);
  if (size == 0) {  // the guest asks for the value's size
    ssize_t n = ::fgetxattr(fd.get(), name, nullptr, 0);
    if (n < 0) return (void)fuse_reply_err(req, errno);
    return (void)fuse_reply_xattr(req, std::min<size_t>(static_cast<size_t>(n), XATTR_SIZE_MAX));
  }
  std::vector<char> buf(std::min<size_t>(size, XATTR_SIZE_MAX));
  ssize_t n = ::fgetxattr(fd.get(), name, buf.data(), buf.size());
  if (n < 0) return (void)fuse_reply_err(req, errno);
  fuse_reply_buf(req, buf.data(), static_cast<size_t>(n));
}

void listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  auto& fs = fsOf(req);
  auto* i = fs.inode(ino);
  if (!i) return (void)fuse_reply_err(req, ESTALE);
  std::string names;  // the user.* names, each ended by a NUL
  if (holdsUserAttrs(*i)) {
    Fd fd;
    if (int e = openFor(fs, *i, fd)) return (void)fuse_reply_err(req, e);
    std::vector<char> all(XATTR_LIST_MAX);
    ssize_t n = ::flistxattr(fd.get(), all.data(), all.size());
    if (n < 0) return (void)fuse_reply_err(req, errno == ERANGE ? E2BIG : errno);
    for (size_t off = 0; off < static_cast<size_t>(n);) {
      size_t len = ::strnlen(all.data() + off, static_cast<size_t>(n) - off);
      std::string_view one(all.data() + off, len);
      if (spaceOf(one) == Space::kUser) names.append(one).push_back('\0');
      off += len + 1;
    }
  }
  if (size == 0) return (void)fuse_reply_xattr(req, names.size());
  if (size < names.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, names.data(), names.size());
}

void setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
              int flags) {
  auto& fs = fsOf(req);
  auto* i = fs.inode(ino);
  if (!i) return (void)fuse_reply_err(req, ESTALE);
  if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) return (void)fuse_reply_err(req, EINVAL);
  if (size > XATTR_SIZE_MAX) return (void)fuse_reply_err(req, E2BIG);
  if (int e = checkChange(fs, *i, name)) return (void)fuse_reply_err(req, e);
  Fd fd;
  if (int e = openFor(fs, *i, fd)) return (void)fuse_reply_err(req, e);
  fuse_reply_err(req, ::fsetxattr(fd.get(), name, value, size, flags) == 0 ? 0 : errno);
}

void removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  auto& fs = fsOf(req);
  auto* i = fs.inode(ino);
  if (!i) return (void)fuse_reply_err(req, ESTALE);
  if (int e = checkChange(fs, *i, name)) return (void)fuse_reply_err(req, e);
  Fd fd;
  if (int e = openFor(fs, *i, fd)) return (void)fuse_reply_err(req, e);
  fuse_reply_err(req, ::fremovexattr(fd.get(), name) == 0 ? 0 : errno);
}

}  // namespace vessel::volumes::fs_ops
