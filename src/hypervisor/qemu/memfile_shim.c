// Loaded (LD_PRELOAD) into a jailed QEMU that restores a clone from a
// template. QEMU 7.2 opens a memory-backend-file's mem-path O_RDWR even with
// share=off, but the template's memory file is shared by every clone and is
// mounted read-only in each jail: no clone may be able to write it. A
// private (copy-on-write) mapping needs only read access, so this shim
// answers QEMU's open of exactly that path with a duplicate of the
// read-only fd vesseld passed (VESSEL_MEMFILE_FD). Every other open goes
// straight to the kernel. QEMU 8.2's memory-backend-file `rom=off` makes
// this unnecessary.
#undef _FORTIFY_SOURCE
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char* memfile_path;
static int memfile_fd = -1;

__attribute__((constructor)) static void vessel_memfile_init(void) {
  memfile_path = getenv("VESSEL_MEMFILE");
  const char* fd = getenv("VESSEL_MEMFILE_FD");
  if (fd) memfile_fd = atoi(fd);
}

static int intercept(const char* path, int flags) {
  if (memfile_fd < 0 || !memfile_path || !path || strcmp(path, memfile_path) != 0) return -1;
  if (flags & (O_CREAT | O_TRUNC)) return -1;
  return fcntl(memfile_fd, F_DUPFD_CLOEXEC, 0);
}

static int do_openat(int dirfd, const char* path, int flags, mode_t mode) {
  int fd = intercept(path, flags);
  if (fd >= 0) return fd;
  return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

static mode_t mode_arg(int flags, va_list ap) {
  return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t m = mode_arg(flags, ap);
  va_end(ap);
  return do_openat(AT_FDCWD, path, flags, m);
}
int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t m = mode_arg(flags, ap);
  va_end(ap);
  return do_openat(AT_FDCWD, path, flags, m);
}
int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t m = mode_arg(flags, ap);
  va_end(ap);
  return do_openat(dirfd, path, flags, m);
}
int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t m = mode_arg(flags, ap);
  va_end(ap);
  return do_openat(dirfd, path, flags, m);
}
// The _FORTIFY_SOURCE entry points QEMU is built against.
int __open_2(const char* path, int flags) { return do_openat(AT_FDCWD, path, flags, 0); }
int __open64_2(const char* path, int flags) { return do_openat(AT_FDCWD, path, flags, 0); }
int __openat_2(int dirfd, const char* path, int flags) {
  return do_openat(dirfd, path, flags, 0);
}
int __openat64_2(int dirfd, const char* path, int flags) {
  return do_openat(dirfd, path, flags, 0);
}
