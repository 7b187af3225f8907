// PassthroughFs: the inode and handle tables, lookups, and the calls that
// change names (create, mkdir, mknod, symlink, link, unlink, rmdir,
// rename) and attributes. Reads, writes and directories: fuse_fs_io.cc.
#include "volumes/fuse_fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "volumes/fuse_fs_internal.h"

namespace vessel::volumes {

bool plainName(const char* name) {
  size_t n = ::strnlen(name, 256);
  if (n == 0 || n > 255) return false;
  if (std::strchr(name, '/')) return false;
  return std::strcmp(name, ".") != 0 && std::strcmp(name, "..") != 0;
}

PassthroughFs::Handle::~Handle() {
  if (dir) {
    ::closedir(dir);  // closes the fd it was made from
    (void)fd.release();
  }
}

PassthroughFs::PassthroughFs(FsOptions o)
    : proc_self_fd_(std::move(o.proc_self_fd)), read_only_(o.read_only) {
  struct stat st {};
  (void)::fstatat(o.root.get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
  root_dev_ = st.st_dev;
  Inode r;
  r.fd = std::move(o.root);
  r.dev = st.st_dev;
  r.ino = st.st_ino;
  r.type = S_IFDIR;
  r.nlookup = 1;  // the kernel never forgets the root
  by_file_[{r.dev, r.ino}] = FUSE_ROOT_ID;
  inodes_.emplace(FUSE_ROOT_ID, std::move(r));
}

PassthroughFs::Inode* PassthroughFs::inode(fuse_ino_t id) {
  auto it = inodes_.find(id);
  return it == inodes_.end() ? nullptr : &it->second;
}

PassthroughFs::Handle* PassthroughFs::handle(uint64_t fh) {
  auto it = handles_.find(fh);
  return it == handles_.end() ? nullptr : it->second.get();
}

uint64_t PassthroughFs::addHandle(std::unique_ptr<Handle> h) {
  if (handles_.size() >= kMaxHandles) return 0;
  uint64_t fh = next_fh_++;
  handles_.emplace(fh, std::move(h));
  return fh;
}

int PassthroughFs::reopen(const Inode& i, int flags) const {
  std::string n = std::to_string(i.fd.get());
  // Never O_CREAT (a magic link names an existing file) nor O_NOFOLLOW
  // (which would refuse the magic link itself).
  flags &= ~(O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_PATH);
  return ::openat(proc_self_fd_.get(), n.c_str(), flags | O_CLOEXEC);
}

int PassthroughFs::lookup(fuse_ino_t parent, const char* name, fuse_entry_param* e) {
  Inode* p = inode(parent);
  if (!p) return ESTALE;
  if (!S_ISDIR(p->type)) return ENOTDIR;
  if (!plainName(name)) return EINVAL;
  int fd = ::openat(p->fd.get(), name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno;
  Fd owned(fd);
  std::memset(e, 0, sizeof *e);
  if (::fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) return errno;
  // Another filesystem mounted in the volume's tree is not the volume's.
  if (e->attr.st_dev != root_dev_) return EXDEV;
  auto key = std::make_pair(e->attr.st_dev, e->attr.st_ino);
  fuse_ino_t id;
  if (auto it = by_file_.find(key); it != by_file_.end()) {
    id = it->second;
    inodes_.at(id).nlookup++;
  } else {
    if (inodes_.size() >= kMaxInodes) return ENFILE;
    id = next_ino_++;
    Inode i;
    i.fd = std::move(owned);
    i.dev = e->attr.st_dev;
    i.ino = e->attr.st_ino;
    i.type = e->attr.st_mode & S_IFMT;
    i.nlookup = 1;
    inodes_.emplace(id, std::move(i));
    by_file_[key] = id;
  }
  e->ino = id;
  // No caching across calls beyond a second: other sandboxes and the API
  // change the same files (close-to-open consistency comes from open).
  e->attr_timeout = 1.0;
  e->entry_timeout = 1.0;
  return 0;
}

void PassthroughFs::forget(fuse_ino_t id, uint64_t n) {
  if (id == FUSE_ROOT_ID) return;
  auto it = inodes_.find(id);
  if (it == inodes_.end()) return;
  if (it->second.nlookup > n) {
    it->second.nlookup -= n;
    return;
  }
  by_file_.erase({it->second.dev, it->second.ino});
  inodes_.erase(it);
  // No lock outlives every reference to its file (the kernel closes,
  // flushing, before it forgets).
  lock_fds_.erase(lock_fds_.lower_bound({id, 0}), lock_fds_.upper_bound({id, UINT64_MAX}));
}

namespace fs_ops {

namespace {

// Gives a new file the caller's owner (the server itself is one uid).
int chownNew(int dirfd, const char* name, fuse_req_t req) {
  const fuse_ctx* c = fuse_req_ctx(req);
  if (::fchownat(dirfd, name, c->uid, c->gid, AT_SYMLINK_NOFOLLOW) != 0) return errno;
  return 0;
}

void replyEntry(fuse_req_t req, PassthroughFs& fs, fuse_ino_t parent, const char* name) {
  fuse_entry_param e;
  int err = fs.lookup(parent, name, &e);
  if (err) {
    fuse_reply_err(req, err);
    return;
  }
  fuse_reply_entry(req, &e);
}

}  // namespace

void lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_entry_param e;
  int err = fsOf(req).lookup(parent, name, &e);
  if (err == ENOENT) {
    // A negative entry the kernel may cache briefly.
    std::memset(&e, 0, sizeof e);
    e.entry_timeout = 1.0;
    fuse_reply_entry(req, &e);
    return;
  }
  if (err) {
    fuse_reply_err(req, err);
    return;
  }
  fuse_reply_entry(req, &e);
}

void forget(fuse_req_t req, fuse_ino_t ino, uint64_t n) {
  fsOf(req).forget(ino, n);
  fuse_reply_none(req);
}

void forgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  auto& fs = fsOf(req);
  for (size_t i = 0; i < count; ++i) fs.forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  auto* i = fsOf(req).inode(ino);
  if (!i) return (void)fuse_reply_err(req, ESTALE);
  struct stat st;
  if (::fstatat(i->fd.get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
    return (void)fuse_reply_err(req, errno);
  fuse_reply_attr(req, &st, 1.0);
}

// Each attribute through the open file when the kernel names one, else
// through the inode: its owner with fchownat on the O_PATH fd, its mode,
// size and times on a reopened one (a symbolic link has none to change).
void setattr(fuse_req_t req, fuse_ino_t ino, struct stat* a, int to_set, fuse_file_info* fi) {
  auto& fs = fsOf(req);
  auto* i = fs.inode(ino);
  if (!i) return (void)fuse_reply_err(req, ESTALE);
  if (fs.readOnly()) return (void)fuse_reply_err(req, EROFS);
  PassthroughFs::Handle* h = fi ? fs.handle(fi->fh) : nullptr;
  if (fi && !h) return (void)fuse_reply_err(req, EBADF);
  if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
    uid_t u = (to_set & FUSE_SET_ATTR_UID) ? a->st_uid : static_cast<uid_t>(-1);
    gid_t g = (to_set & FUSE_SET_ATTR_GID) ? a->st_gid : static_cast<gid_t>(-1);
    if (::fchownat(i->fd.get(), "", u, g, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
      return (void)fuse_reply_err(req, errno);
  }
  int want = to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME |
                       FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW);
  if (want) {
    if (S_ISLNK(i->type)) return (void)fuse_reply_err(req, EPERM);
    Fd tmp;
    int fd = h ? h->fd.get() : -1;
    if (fd < 0) {
      int flags = (to_set & FUSE_SET_ATTR_SIZE) ? O_WRONLY : O_RDONLY;
      if (S_ISDIR(i->type)) flags = O_RDONLY | O_DIRECTORY;
      tmp.reset(fs.reopen(*i, flags | O_NONBLOCK));
      if (!tmp) return (void)fuse_reply_err(req, errno);
      fd = tmp.get();
    }
    if ((to_set & FUSE_SET_ATTR_MODE) && ::fchmod(fd, a->st_mode & 07777) != 0)
      return (void)fuse_reply_err(req, errno);
    if ((to_set & FUSE_SET_ATTR_SIZE) && ::ftruncate(fd, a->st_size) != 0)
      return (void)fuse_reply_err(req, errno);
    if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
                  FUSE_SET_ATTR_MTIME_NOW)) {
      timespec tv[2];
      tv[0].tv_nsec = tv[1].tv_nsec = UTIME_OMIT;
      if (to_set & FUSE_SET_ATTR_ATIME_NOW)
        tv[0].tv_nsec = UTIME_NOW;
      else if (to_set & FUSE_SET_ATTR_ATIME)
        tv[0] = a->st_atim;
      if (to_set & FUSE_SET_ATTR_MTIME_NOW)
        tv[1].tv_nsec = UTIME_NOW;
      else if (to_set & FUSE_SET_ATTR_MTIME)
        tv[1] = a->st_mtim;
      if (::futimens(fd, tv) != 0) return (void)fuse_reply_err(req, errno);
    }
  }
  getattr(req, ino, nullptr);
}

void readlink(fuse_req_t req, fuse_ino_t ino) {
  auto* i = fsOf(req).inode(ino);
  if (!i) return (void)fuse_reply_err(req, ESTALE);
  char buf[PATH_MAX + 1];
  ssize_t n = ::readlinkat(i->fd.get(), "", buf, PATH_MAX);
  if (n < 0) return (void)fuse_reply_err(req, errno);
  buf[n] = '\0';
  fuse_reply_readlink(req, buf);
}

// The parent's fd for a call that makes or removes `name` in it, or -1
// with `err` set (unknown node, bad name, read-only volume).
int parentFor(fuse_req_t req, fuse_ino_t parent, const char* name, int& err) {
  auto& fs = fsOf(req);
  auto* p = fs.inode(parent);
  if (!p) return err = ESTALE, -1;
  if (!S_ISDIR(p->type)) return err = ENOTDIR, -1;
  if (!plainName(name)) return err = EINVAL, -1;
  if (fs.readOnly()) return err = EROFS, -1;
  return p->fd.get();
}

void mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t) {
  int err = 0;
  int dfd = parentFor(req, parent, name, err);
  if (dfd < 0) return (void)fuse_reply_err(req, err);
  // Files, FIFOs and sockets; never a device node, whatever the guest says.
  mode_t type = mode & S_IFMT;
  if (type != S_IFREG && type != S_IFIFO && type != S_IFSOCK)
    return (void)fuse_reply_err(req, EPERM);
  if (::mknodat(dfd, name, type | (mode & 07777), 0) != 0) return (void)fuse_reply_err(req, errno);
  if ((err = chownNew(dfd, name, req))) return (void)fuse_reply_err(req, err);
  replyEntry(req, fsOf(req), parent, name);
}

void mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  int err = 0;
  int dfd = parentFor(req, parent, name, err);
  if (dfd < 0) return (void)fuse_reply_err(req, err);
  if (::mkdirat(dfd, name, mode & 07777) != 0) return (void)fuse_reply_err(req, errno);
  if ((err = chownNew(dfd, name, req))) return (void)fuse_reply_err(req, err);
  replyEntry(req, fsOf(req), parent, name);
}

void symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  int err = 0;
  int dfd = parentFor(req, parent, name, err);
  if (dfd < 0) return (void)fuse_reply_err(req, err);
  // The target is only text here: the server never follows a link.
  if (::strnlen(target, PATH_MAX) >= PATH_MAX) return (void)fuse_reply_err(req, ENAMETOOLONG);
  if (::symlinkat(target, dfd, name) != 0) return (void)fuse_reply_err(req, errno);
  if ((err = chownNew(dfd, name, req))) return (void)fuse_reply_err(req, err);
  replyEntry(req, fsOf(req), parent, name);
}

void link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char* name) {
  auto& fs = fsOf(req);
  int err = 0;
  int dfd = parentFor(req, parent, name, err);
  if (dfd < 0) return (void)fuse_reply_err(req, err);
  auto* i = fs.inode(ino);
  if (!i) return (void)fuse_reply_err(req, ESTALE);
  if (S_ISDIR(i->type)) return (void)fuse_reply_err(req, EPERM);
  // Through the magic link of the inode's own fd: the same file.
  if (::linkat(fs.procSelfFd(), std::to_string(i->fd.get()).c_str(), dfd, name,
               AT_SYMLINK_FOLLOW) != 0)
    return (void)fuse_reply_err(req, errno);
  replyEntry(req, fs, parent, name);
}

void unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  int err = 0;
  int dfd = parentFor(req, parent, name, err);
  if (dfd < 0) return (void)fuse_reply_err(req, err);
  fuse_reply_err(req, ::unlinkat(dfd, name, 0) == 0 ? 0 : errno);
}

void rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  int err = 0;
  int dfd = parentFor(req, parent, name, err);
  if (dfd < 0) return (void)fuse_reply_err(req, err);
  fuse_reply_err(req, ::unlinkat(dfd, name, AT_REMOVEDIR) == 0 ? 0 : errno);
}

void rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
            const char* newname, unsigned int flags) {
  int err = 0;
  int from = parentFor(req, parent, name, err);
  if (from < 0) return (void)fuse_reply_err(req, err);
  int to = parentFor(req, newparent, newname, err);
  if (to < 0) return (void)fuse_reply_err(req, err);
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return (void)fuse_reply_err(req, EINVAL);
  fuse_reply_err(req, ::renameat2(from, name, to, newname, flags) == 0 ? 0 : errno);
}

void create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  auto& fs = fsOf(req);
  int err = 0;
  int dfd = parentFor(req, parent, name, err);
  if (dfd < 0) return (void)fuse_reply_err(req, err);
  int flags = (fi->flags & ~(O_NOCTTY | O_PATH)) | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::openat(dfd, name, flags, mode & 07777);
  if (fd < 0) return (void)fuse_reply_err(req, errno);
  auto h = std::make_unique<PassthroughFs::Handle>();
  h->fd.reset(fd);
  if ((err = chownNew(dfd, name, req))) return (void)fuse_reply_err(req, err);
  fuse_entry_param e;
  if ((err = fs.lookup(parent, name, &e))) return (void)fuse_reply_err(req, err);
  fi->fh = fs.addHandle(std::move(h));
  if (fi->fh == 0) {
    fs.forget(e.ino, 1);
    return (void)fuse_reply_err(req, ENFILE);
  }
  fuse_reply_create(req, &e, fi);
}

}  // namespace fs_ops

}  // namespace vessel::volumes
