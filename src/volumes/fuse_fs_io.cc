// PassthroughFs: the session's set-up (init), open files, directories,
// statfs and the ops table. Names and attributes: fuse_fs.cc.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "volumes/fuse_fs.h"
#include "volumes/fuse_fs_internal.h"

namespace vessel::volumes {

namespace fs_ops {

void init(void*, fuse_conn_info* conn) {
  // One FUSE message must fit one agent frame: writes and reads of at most
  // kFuseMaxIo (libfuse derives max_pages from max_write).
  conn->max_write = kFuseMaxIo;
  if (conn->max_readahead > kFuseMaxIo) conn->max_readahead = kFuseMaxIo;
  // Messages travel as copies over a socket: no splice; and the guest's
  // page cache must not hold writes other sandboxes cannot see.
  conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
                  FUSE_CAP_WRITEBACK_CACHE);
}

void open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto& fs = fsOf(req);
  auto* i = fs.inode(ino);
  if (!i) return (void)fuse_reply_err(req, ESTALE);
  if (S_ISLNK(i->type)) return (void)fuse_reply_err(req, ELOOP);
  int flags = fi->flags & ~(O_DIRECT | O_CREAT | O_EXCL);
  bool writes = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
  if (writes && fs.readOnly()) return (void)fuse_reply_err(req, EROFS);
  // A FIFO in a volume is not a channel to the host: no blocking open.
  int fd = fs.reopen(*i, flags | (S_ISREG(i->type) ? 0 : O_NONBLOCK));
  if (fd < 0) return (void)fuse_reply_err(req, errno);
  auto h = std::make_unique<PassthroughFs::Handle>();
  h->fd.reset(fd);
  fi->fh = fs.addHandle(std::move(h));
  if (fi->fh == 0) return (void)fuse_reply_err(req, ENFILE);
  // keep_cache stays 0: the guest drops its cached pages at each open, so
  // what another sandbox wrote and closed is what the next open reads.
  fuse_reply_open(req, fi);
}

void read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  auto* h = fsOf(req).handle(fi->fh);
  if (!h || h->dir) return (void)fuse_reply_err(req, EBADF);
  if (size > kFuseMaxIo || off < 0) return (void)fuse_reply_err(req, EINVAL);
  std::vector<char> buf(size);
  ssize_t n = ::pread(h->fd.get(), buf.data(), size, off);
  if (n < 0) return (void)fuse_reply_err(req, errno);
  fuse_reply_buf(req, buf.data(), static_cast<size_t>(n));
}

void write(fuse_req_t req, fuse_ino_t, const char* buf, size_t size, off_t off,
           fuse_file_info* fi) {
  auto& fs = fsOf(req);
  auto* h = fs.handle(fi->fh);
  if (!h || h->dir) return (void)fuse_reply_err(req, EBADF);
  if (fs.readOnly()) return (void)fuse_reply_err(req, EROFS);
  if (size > kFuseMaxIo || off < 0) return (void)fuse_reply_err(req, EINVAL);
  ssize_t n = ::pwrite(h->fd.get(), buf, size, off);
  if (n < 0) return (void)fuse_reply_err(req, errno);
  fuse_reply_write(req, static_cast<size_t>(n));
}

void flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto& fs = fsOf(req);
  // Nothing is buffered here: a write is on the host's file when answered.
  if (!fs.handle(fi->fh)) return (void)fuse_reply_err(req, EBADF);
  // A close in the guest: in POSIX the closing process's fcntl locks on
  // the file all go (fuse_fs_locks.cc).
  fs.dropLockOwner(ino, fi->lock_owner);
  fuse_reply_err(req, 0);
}

void release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto& fs = fsOf(req);
  if (fi->flush) fs.dropLockOwner(ino, fi->lock_owner);  // a flush the kernel folded in
  // Closing the handle's fd drops its flock locks.
  fs.dropHandle(fi->fh);
  fuse_reply_err(req, 0);
}

void fsync(fuse_req_t req, fuse_ino_t, int datasync, fuse_file_info* fi) {
  auto* h = fsOf(req).handle(fi->fh);
  if (!h) return (void)fuse_reply_err(req, EBADF);
  int fd = h->dir ? ::dirfd(h->dir) : h->fd.get();
  int r = datasync ? ::fdatasync(fd) : ::fsync(fd);
  fuse_reply_err(req, r == 0 ? 0 : errno);
}

void opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto& fs = fsOf(req);
  auto* i = fs.inode(ino);
  if (!i) return (void)fuse_reply_err(req, ESTALE);
  if (!S_ISDIR(i->type)) return (void)fuse_reply_err(req, ENOTDIR);
  int fd = ::openat(i->fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return (void)fuse_reply_err(req, errno);
  auto h = std::make_unique<PassthroughFs::Handle>();
  h->dir = ::fdopendir(fd);
  if (!h->dir) {
    int e = errno;
    ::close(fd);
    return (void)fuse_reply_err(req, e);
  }
  h->fd.reset(fd);  // owned by dir; released in ~Handle
  fi->fh = fs.addHandle(std::move(h));
  if (fi->fh == 0) return (void)fuse_reply_err(req, ENFILE);
  fuse_reply_open(req, fi);
}

void readdir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  auto* h = fsOf(req).handle(fi->fh);
  if (!h || !h->dir) return (void)fuse_reply_err(req, EBADF);
  if (size > kFuseMaxIo) size = kFuseMaxIo;
  std::vector<char> buf(size);
  if (off != h->dir_offset) {
    ::seekdir(h->dir, off);
    h->dir_offset = off;
  }
  size_t used = 0;
  for (;;) {
    errno = 0;
    dirent* d = ::readdir(h->dir);
    if (!d) {
      if (errno && used == 0) return (void)fuse_reply_err(req, errno);
      break;
    }
    struct stat st {};
    st.st_ino = d->d_ino;
    st.st_mode = static_cast<mode_t>(d->d_type) << 12;
    size_t n = fuse_add_direntry(req, buf.data() + used, size - used, d->d_name, &st, d->d_off);
    if (n > size - used) {
      // No room: this entry comes first next time.
      ::seekdir(h->dir, h->dir_offset);
      break;
    }
    used += n;
    h->dir_offset = d->d_off;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  fsOf(req).dropHandle(fi->fh);
  fuse_reply_err(req, 0);
}

void statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs sv;
  if (::fstatvfs(fsOf(req).rootFd(), &sv) != 0) return (void)fuse_reply_err(req, errno);
  fuse_reply_statfs(req, &sv);
}

}  // namespace fs_ops

const fuse_lowlevel_ops& PassthroughFs::ops() {
  static const fuse_lowlevel_ops kOps = [] {
    fuse_lowlevel_ops o{};
    o.init = fs_ops::init;
    o.lookup = fs_ops::lookup;
    o.forget = fs_ops::forget;
    o.forget_multi = fs_ops::forgetMulti;
    o.getattr = fs_ops::getattr;
    o.setattr = fs_ops::setattr;
    o.readlink = fs_ops::readlink;
    o.mknod = fs_ops::mknod;
    o.mkdir = fs_ops::mkdir;
    o.symlink = fs_ops::symlink;
    o.link = fs_ops::link;
    o.unlink = fs_ops::unlink;
    o.rmdir = fs_ops::rmdir;
    o.rename = fs_ops::rename;
    o.create = fs_ops::create;
    o.open = fs_ops::open;
    o.read = fs_ops::read;
    o.write = fs_ops::write;
    o.flush = fs_ops::flush;
    o.release = fs_ops::release;
    o.fsync = fs_ops::fsync;
    o.opendir = fs_ops::opendir;
    o.readdir = fs_ops::readdir;
    o.releasedir = fs_ops::releasedir;
    o.fsyncdir = fs_ops::fsync;
    o.statfs = fs_ops::statfs;
    // Setting these makes libfuse offer FUSE_POSIX_LOCKS and
    // FUSE_FLOCK_LOCKS: the guest's kernel then sends its locks here
    // instead of keeping them to itself.
    o.getlk = fs_ops::getlk;
    o.setlk = fs_ops::setlk;
    o.flock = fs_ops::flock;
    o.getxattr = fs_ops::getxattr;
    o.listxattr = fs_ops::listxattr;
    o.setxattr = fs_ops::setxattr;
    o.removexattr = fs_ops::removexattr;
    return o;
  }();
  return kOps;
}

}  // namespace vessel::volumes
