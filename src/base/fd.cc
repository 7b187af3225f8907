#include "base/fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace vessel {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Result<Fd> Fd::open(const std::string& path, int flags, int mode) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return Error::fromErrno("open " + path);
  return Fd(fd);
}

Result<Pipe> Pipe::create(int extra_flags) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | extra_flags) != 0) return Error::fromErrno("pipe2");
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}

Result<std::string> readFile(const std::string& path, size_t max_bytes) {
  VESSEL_ASSIGN_OR_RETURN(Fd fd, Fd::open(path, O_RDONLY));
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::fromErrno("read " + path);
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes)
      return Error(Code::kResourceExhausted,
                   "read " + path + ": larger than " + std::to_string(max_bytes) + " bytes");
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status writeFileAtomic(const std::string& path, std::string_view data, int mode) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    VESSEL_ASSIGN_OR_RETURN(Fd fd, Fd::open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode));
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::write(fd.get(), data.data() + off, data.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        int e = errno;
        ::unlink(tmp.c_str());
        return Error::fromErrno("write " + tmp, e);
      }
      off += static_cast<size_t>(n);
    }
    if (::fsync(fd.get()) != 0) {
      int e = errno;
      ::unlink(tmp.c_str());
      return Error::fromErrno("fsync " + tmp, e);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return Error::fromErrno("rename " + tmp + " to " + path, e);
  }
  return okStatus();
}

}  // namespace vessel
