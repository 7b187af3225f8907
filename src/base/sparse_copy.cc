#include "base/sparse_copy.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/fd.h"

namespace vessel {

namespace {

// One extent with pread/pwrite: what copy_file_range does in the kernel.
ssize_t copyByHand(int in, off_t* src, int out, off_t* dst, size_t len) {
  char buf[1 << 16];
  size_t done = 0;
  while (done < len) {
    ssize_t r = ::pread(in, buf, std::min(sizeof buf, len - done), *src);
    if (r < 0) return -1;
    if (r == 0) break;
    for (ssize_t w = 0; w < r;) {
      ssize_t n = ::pwrite(out, buf + w, static_cast<size_t>(r - w), *dst + w);
      if (n < 0) return -1;
      w += n;
    }
    *src += r;
    *dst += r;
    done += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(done);
}

}  // namespace

Status copySparse(const std::string& from, const std::string& to, int mode,
                  uint64_t max_data_bytes) {
  std::string ctx = "copy " + from + " to " + to;
  auto in = Fd::open(from, O_RDONLY | O_CLOEXEC);
  if (!in.ok()) return std::move(in).error().withContext(ctx);
  auto out = Fd::open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (!out.ok()) return std::move(out).error().withContext(ctx);
  struct stat st {};
  if (::fstat(in->get(), &st) != 0) return Error::fromErrno(ctx + ": stat");
  if (static_cast<uint64_t>(st.st_blocks) * 512 > max_data_bytes)
    return Error(Code::kResourceExhausted,
                 ctx + ": more than " + std::to_string(max_data_bytes >> 20) + " MiB");
  // A reflink shares blocks: it costs no space, whatever the file holds.
  if (::ioctl(out->get(), FICLONE, in->get()) == 0) return okStatus();
  uint64_t copied = 0;
  off_t pos = 0;
  while (pos < st.st_size) {
    off_t data = ::lseek(in->get(), pos, SEEK_DATA);
    if (data < 0) break;  // ENXIO: only a hole is left
    off_t hole = ::lseek(in->get(), data, SEEK_HOLE);
    if (hole < 0) return Error::fromErrno(ctx + ": seek");
    off_t src = data, dst = data;
    copied += static_cast<uint64_t>(hole - data);
    if (copied > max_data_bytes)
      return Error(Code::kResourceExhausted,
                   ctx + ": more than " + std::to_string(max_data_bytes >> 20) + " MiB");
    while (src < hole) {
      ssize_t n =
          ::copy_file_range(in->get(), &src, out->get(), &dst, static_cast<size_t>(hole - src), 0);
      // Across filesystems (EXDEV) or where the kernel cannot: by hand.
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP))
        n = copyByHand(in->get(), &src, out->get(), &dst, static_cast<size_t>(hole - src));
      if (n < 0) return Error::fromErrno(ctx);
      if (n == 0) break;  // the file shrank under us: copy what is there
    }
    pos = hole;
  }
  if (::ftruncate(out->get(), st.st_size) != 0) return Error::fromErrno(ctx + ": truncate");
  if (::fsync(out->get()) != 0) return Error::fromErrno(ctx + ": fsync");
  return okStatus();
}

}  // namespace vessel
