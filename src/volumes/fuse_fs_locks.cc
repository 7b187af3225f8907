// PassthroughFs: file locks that hold across sandboxes (docs/design.md,
// "Volumes"). Every mount of a volume has a server of its own, so a lock
// must live in the host's kernel, on the host's file, for another server's
// lock on it to conflict: fcntl locks become Linux OFD locks, flock locks
// flock(2) locks, on fds of this process. Nothing here ever blocks: a lock
// that must wait is tried again by the server's loop (retryLocks).
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "volumes/fuse_fs.h"
#include "volumes/fuse_fs_internal.h"

namespace vessel::volumes {

// A POSIX lock belongs to a process and covers all its fds of the file
// (a second fd re-locks or unlocks the same ranges); an OFD lock belongs to
// one open file description. One lock fd per (file, owner) makes the two
// agree: the kernel's lock_owner names the guest's process.
int PassthroughFs::lockFd(fuse_ino_t id, uint64_t owner, bool create, int& err) {
  auto key = std::make_pair(id, owner);
  if (auto it = lock_fds_.find(key); it != lock_fds_.end()) return it->second.get();
  err = 0;
  if (!create) return -1;
  Inode* i = inode(id);
  if (!i) return err = ESTALE, -1;
  if (!S_ISREG(i->type)) return err = EINVAL, -1;
  if (lock_fds_.size() >= kMaxLockOwners) return err = ENOLCK, -1;
  // Read and write, so that it takes either lock type (the guest's kernel
  // has checked the caller's own fd for the type it asks); read only on a
  // read-only mount, where no fd of the guest writes.
  int fd = read_only_ ? -1 : reopen(*i, O_RDWR | O_NONBLOCK);
  if (fd < 0) fd = reopen(*i, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return err = errno, -1;
  lock_fds_.emplace(key, Fd(fd));
  return fd;
}

void PassthroughFs::dropLockOwner(fuse_ino_t id, uint64_t owner) {
  lock_fds_.erase({id, owner});  // closing its only fd drops its OFD locks
}

int PassthroughFs::tryLock(const LockWaiter& w) {
  if (w.flock_op) {
    Handle* h = handle(w.fh);
    if (!h || h->dir) return EBADF;
    if (::flock(h->fd.get(), w.flock_op | LOCK_NB) == 0) return 0;
    return errno == EWOULDBLOCK ? EAGAIN : errno;
  }
  int err = 0;
  int fd = lockFd(w.ino, w.owner, true, err);
  if (fd < 0) return err;
  struct flock lk = w.lk;
  lk.l_pid = 0;  // OFD locks take none
  if (::fcntl(fd, F_OFD_SETLK, &lk) == 0) return 0;
  return errno == EACCES || errno == EAGAIN ? EAGAIN : errno;
}

void PassthroughFs::addLockWaiter(LockWaiter w) {
  if (lock_waiters_.size() >= kMaxLockWaiters) return (void)fuse_reply_err(w.req, ENOLCK);
  lock_waiters_.push_back(w);
}

void PassthroughFs::retryLocks() {
  // In arrival order: of two waiters here, the first asking is the first
  // to try.
  for (auto it = lock_waiters_.begin(); it != lock_waiters_.end();) {
    // A signal in the guest (FUSE_INTERRUPT): EINTR, which its kernel
    // restarts or returns as the signal's handler asks.
    int err = fuse_req_interrupted(it->req) ? EINTR : tryLock(*it);
    if (err == EAGAIN) {
      ++it;
      continue;
    }
    fuse_reply_err(it->req, err);
    it = lock_waiters_.erase(it);
  }
}

namespace fs_ops {

namespace {

PassthroughFs::Handle* fileHandle(PassthroughFs& fs, fuse_file_info* fi) {
  auto* h = fs.handle(fi->fh);
  return h && !h->dir ? h : nullptr;
}

}  // namespace

void getlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock) {
  auto& fs = fsOf(req);
  auto* h = fileHandle(fs, fi);
  if (!h) return (void)fuse_reply_err(req, EBADF);
  // Through the owner's own lock fd, so that its own locks are not
  // reported; an owner with none holds nothing, and any fd tests for it.
  int err = 0;
  int fd = fs.lockFd(ino, fi->lock_owner, false, err);
  if (fd < 0) fd = h->fd.get();
  struct flock lk = *lock;
  lk.l_pid = 0;
  if (::fcntl(fd, F_OFD_GETLK, &lk) != 0) return (void)fuse_reply_err(req, errno);
  // The holder may be another sandbox's process: no pid names it here.
  lk.l_pid = 0;
  fuse_reply_lock(req, &lk);
}

void setlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock, int sleep) {
  auto& fs = fsOf(req);
  if (!fileHandle(fs, fi)) return (void)fuse_reply_err(req, EBADF);
  PassthroughFs::LockWaiter w;
  w.req = req;
  w.ino = ino;
  w.fh = fi->fh;
  w.owner = fi->lock_owner;
  w.lk = *lock;
  if (lock->l_type == F_UNLCK) {
    int err = 0;
    if (fs.lockFd(ino, fi->lock_owner, false, err) < 0)
      return (void)fuse_reply_err(req, 0);  // the owner holds nothing here
  }
  int err = fs.tryLock(w);
  if (err == EAGAIN && sleep) return fs.addLockWaiter(w);
  fuse_reply_err(req, err);
}

void flock(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, int op) {
  auto& fs = fsOf(req);
  auto* h = fileHandle(fs, fi);
  if (!h) return (void)fuse_reply_err(req, EBADF);
  int kind = op & (LOCK_SH | LOCK_EX | LOCK_UN);
  if (kind == LOCK_UN)
    return (void)fuse_reply_err(req, ::flock(h->fd.get(), LOCK_UN) == 0 ? 0 : errno);
  if (kind != LOCK_SH && kind != LOCK_EX) return (void)fuse_reply_err(req, EINVAL);
  PassthroughFs::LockWaiter w;
  w.req = req;
  w.ino = ino;
  w.fh = fi->fh;
  w.flock_op = kind;
  int err = fs.tryLock(w);
  if (err == EAGAIN && !(op & LOCK_NB)) return fs.addLockWaiter(w);
  fuse_reply_err(req, err);
}

}  // namespace fs_ops

}  // namespace vessel::volumes
