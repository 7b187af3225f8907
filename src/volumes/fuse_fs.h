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
#include <fuse_lowlevel.h>
#include <sys/types.h>

#include <cstdint>
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

  bool readOnly() const { return read_only_; }
  int procSelfFd() const { return proc_self_fd_.get(); }
  int rootFd() const { return inodes_.at(FUSE_ROOT_ID).fd.get(); }

 private:
  std::map<fuse_ino_t, Inode> inodes_;
  std::map<std::pair<dev_t, ino_t>, fuse_ino_t> by_file_;
  std::map<uint64_t, std::unique_ptr<Handle>> handles_;
  fuse_ino_t next_ino_ = FUSE_ROOT_ID + 1;
  uint64_t next_fh_ = 1;
  dev_t root_dev_ = 0;
  Fd proc_self_fd_;
  bool read_only_;
};

// Whether `name` is one plain component: 1-255 bytes, no '/', not "." or "..".
bool plainName(const char* name);

}  // namespace vessel::volumes
