#pragma once
// The libfuse callbacks of PassthroughFs (fuse_fs.cc, fuse_fs_io.cc,
// fuse_fs_locks.cc, fuse_fs_xattr.cc), for its ops table.
#include "volumes/fuse_fs.h"

namespace vessel::volumes::fs_ops {

// SAFETY: the session's userdata is the PassthroughFs the server made the
// session with (fuse_server.cc), alive for the session's whole loop.
inline PassthroughFs& fsOf(fuse_req_t req) {
  return *static_cast<PassthroughFs*>(fuse_req_userdata(req));
}

void init(void* userdata, fuse_conn_info* conn);
void lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
void forget(fuse_req_t req, fuse_ino_t ino, uint64_t n);
void forgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets);
void getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void setattr(fuse_req_t req, fuse_ino_t ino, struct stat* a, int to_set, fuse_file_info* fi);
void readlink(fuse_req_t req, fuse_ino_t ino);
void mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev);
void mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode);
void symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name);
void link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char* name);
void unlink(fuse_req_t req, fuse_ino_t parent, const char* name);
void rmdir(fuse_req_t req, fuse_ino_t parent, const char* name);
void rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
            const char* newname, unsigned int flags);
void create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi);
void open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
           fuse_file_info* fi);
void flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);
void opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void statfs(fuse_req_t req, fuse_ino_t ino);
// File locks (fuse_fs_locks.cc).
void getlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock);
void setlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock, int sleep);
void flock(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, int op);
// Extended attributes (fuse_fs_xattr.cc).
void getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size);
void listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
              int flags);
void removexattr(fuse_req_t req, fuse_ino_t ino, const char* name);

}  // namespace vessel::volumes::fs_ops
