#pragma once
// Fd owns one file descriptor: move-only, closed in the destructor. Everything
// Vessel opens is O_CLOEXEC so that a child (QEMU) inherits only the fds it is
// handed explicitly.
#include <string>

#include "base/result.h"

namespace vessel {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

  static Result<Fd> open(const std::string& path, int flags, int mode = 0644);

 private:
  int fd_ = -1;
};

// A pipe: [0] read end, [1] write end, both O_CLOEXEC.
struct Pipe {
  Fd read;
  Fd write;
  static Result<Pipe> create(int extra_flags = 0);
};

// Whole-file helpers for small files (configs, manifests, pid files).
Result<std::string> readFile(const std::string& path, size_t max_bytes = 1 << 20);
// Writes via a temporary file and rename, so readers never see half a file.
Status writeFileAtomic(const std::string& path, std::string_view data, int mode = 0644);

}  // namespace vessel
