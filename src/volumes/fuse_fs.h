#pragma once
// The file server's filesystem (docs/design.md, "Volumes"): a libfuse3
// low-level passthrough onto one volume's host directory, run by
// vessel-volume-server for one mount of one sandbox. What comes in was
// sent by a guest's kernel and is not trusted: node ids and file handles
// are looked up in tables (never used as pointers), every name is one
// plain component (no "/", ".", ".." or empty name), every path is
// resolved one component at a time from an O_PATH fd with O_NOFOLLOW, so
// no symbolic link is ever followed and nothing outside the volume's
// directory can be named; the process is also chrooted there
// (fuse_server.h).
#define FUSE_USE_VERSION 34
#include <dirent.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <sys/types.h>

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "base/fd.h"

namespace vessel::volumes {

// The largest read or write one FUSE request may carry, as the agent
// channel bounds it (agentproto::kMaxVolumeIo).
constexpr size_t kFuseMaxIo = 128 * 1024;
// Inodes the guest's kernel may hold at once, and open files: past them
// a lookup or an open fails with ENFILE rather than growing the server.
constexpr size_t kMaxInodes = 1 << 20;
constexpr size_t kMaxHandles = 1 << 16;
// POSIX lock owners holding a lock fd at once, and lock requests waiting
// (F_SETLKW, flock without LOCK_NB): past them ENOLCK.
constexpr size_t kMaxLockOwners = 4096;
constexpr size_t kMaxLockWaiters = 1024;
// How often a waiting lock is tried again while nothing else happens
// (a lock another server's sandbox holds is released unseen here).
constexpr int kLockRetryMs = 10;

struct FsOptions {
  Fd root;          // O_PATH directory fd of the volume's root
  Fd proc_self_fd;  // O_PATH fd of /proc/self/fd, opened before the chroot
  bool read_only = false;
};

class PassthroughFs {
 public:
  explicit PassthroughFs(FsOptions o);
  // The callbacks libfuse calls, with `this` as the session's userdata.
  static const fuse_lowlevel_ops& ops();

  struct Inode {
    Fd fd;  // O_PATH | O_NOFOLLOW
    dev_t dev = 0;
    ino_t ino = 0;
    mode_t type = 0;  // S_IFMT bits
    uint64_t nlookup = 0;
  };
  struct Handle {
    Fd fd;
    DIR* dir = nullptr;  // directories: owns fd's descriptor
    off_t dir_offset = 0;
    ~Handle();
  };

  // The inode the guest names, or null (then answer EBADF/ESTALE).
  Inode* inode(fuse_ino_t id);
  Handle* handle(uint64_t fh);
  // `name` beneath `parent`, a new lookup reference taken; fills `e`.
  int lookup(fuse_ino_t parent, const char* name, fuse_entry_param* e);
  void forget(fuse_ino_t id, uint64_t n);
  // Reopens an inode's O_PATH fd with real access (`flags`), through
  // /proc/self/fd: the same file, never a path.
  int reopen(const Inode& i, int flags) const;
  uint64_t addHandle(std::unique_ptr<Handle> h);
  void dropHandle(uint64_t fh) { handles_.erase(fh); }

  // File locks (fuse_fs_locks.cc). A POSIX lock owner of the guest (a
  // process, by the kernel's lock_owner) holds its fcntl locks on a file as
  // OFD locks on a lock fd of its own for that file, opened at its first
  // lock and closed at its next flush of that file (a close, which in
  // POSIX drops all the owner's locks on it); flock locks are held on the
  // open handle's fd, released when it closes. The fd of (`id`, `owner`),
  // opened if `create`; -1 with `err` set otherwise.
  int lockFd(fuse_ino_t id, uint64_t owner, bool create, int& err);
  // Closes the owner's lock fd for `id`: all its locks on the file go.
  void dropLockOwner(fuse_ino_t id, uint64_t owner);
  // A lock request that could not be granted yet, tried again by
  // retryLocks until granted, failed or interrupted (FUSE_INTERRUPT).
  struct LockWaiter {
    fuse_req_t req = nullptr;
    fuse_ino_t ino = 0;
    uint64_t fh = 0;
    uint64_t owner = 0;
    struct flock lk {};
    int flock_op = 0;  // LOCK_SH or LOCK_EX for flock(2); 0 for fcntl
  };
  // Queues `w` (which answers ENOLCK when the list is full).
  void addLockWaiter(LockWaiter w);
  bool lockWaiting() const { return !lock_waiters_.empty(); }
  // Tries each waiting lock once: answers those granted, failed or
  // interrupted. Called by the server's loop after each request and every
  // kLockRetryMs.
  void retryLocks();
  // One try of `w`: 0 granted, EAGAIN still held elsewhere, else the error.
  int tryLock(const LockWaiter& w);

  bool readOnly() const { return read_only_; }
  int procSelfFd() const { return proc_self_fd_.get(); }
  int rootFd() const { return inodes_.at(FUSE_ROOT_ID).fd.get(); }

 private:
  std::map<fuse_ino_t, Inode> inodes_;
  std::map<std::pair<dev_t, ino_t>, fuse_ino_t> by_file_;
  std::map<uint64_t, std::unique_ptr<Handle>> handles_;
  std::map<std::pair<fuse_ino_t, uint64_t>, Fd> lock_fds_;
  std::list<LockWaiter> lock_waiters_;
  fuse_ino_t next_ino_ = FUSE_ROOT_ID + 1;
  uint64_t next_fh_ = 1;
  dev_t root_dev_ = 0;
  Fd proc_self_fd_;
  bool read_only_;
};

// Whether `name` is one plain component: 1-255 bytes, no '/', not "." or "..".
bool plainName(const char* name);

}  // namespace vessel::volumes
