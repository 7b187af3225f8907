#include "images/rootfs.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>

#include "base/fd.h"
#include "os/command.h"

namespace vessel::images {

namespace fs = std::filesystem;

namespace {

// openat2 with the image's root as "/": an absolute or ../ symlink in the
// image stays in the image.
int openInRoot(int root, const char* path, uint64_t flags) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, root, path, &how, sizeof how));
}

}  // namespace

Status installAgent(const std::string& rootfs, const std::string& agent) {
  const std::string what = "install the agent in the image";
  VESSEL_ASSIGN_OR_RETURN(Fd root, Fd::open(rootfs, O_PATH | O_DIRECTORY));
  Fd sbin(openInRoot(root.get(), "sbin", O_PATH | O_DIRECTORY));
  if (!sbin && errno == ENOENT) {
    if (::mkdirat(root.get(), "sbin", 0755) != 0)
      return Error::fromErrno(what + ": the image's /sbin is neither a directory nor absent");
    sbin.reset(openInRoot(root.get(), "sbin", O_PATH | O_DIRECTORY));
  }
  if (!sbin) return Error::fromErrno(what + ": open /sbin");
  if (::unlinkat(sbin.get(), "vessel-agent", 0) != 0 && errno != ENOENT)
    return Error::fromErrno(what + ": remove the image's /sbin/vessel-agent");
  Fd out(::openat(sbin.get(), "vessel-agent", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0755));
  if (!out) return Error::fromErrno(what + ": create /sbin/vessel-agent");
  VESSEL_ASSIGN_OR_RETURN(Fd in, Fd::open(agent, O_RDONLY));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::fromErrno(what + ": read " + agent);
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = ::write(out.get(), buf + off, static_cast<size_t>(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Error::fromErrno(what + ": write");
      off += w;
    }
  }
  if (::fchown(out.get(), 0, 0) != 0 && geteuid() == 0) return Error::fromErrno(what + ": chown");
  if (::fchmod(out.get(), 0755) != 0) return Error::fromErrno(what + ": chmod");
  return okStatus();
}

Result<TreeSize> measureTree(const std::string& root, uint64_t max_entries) {
  TreeSize t;
  std::error_code ec;
  // No follow_directory_symlink: the walk stays in the tree.
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
  if (ec) return Error(Code::kInternal, "measure " + root + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return Error(Code::kInternal, "measure " + root + ": " + ec.message());
    if (++t.entries > max_entries)
      return Error(Code::kResourceExhausted,
                   "the image holds more than " + std::to_string(max_entries) + " files");
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    uint64_t b = S_ISREG(st.st_mode)                      ? static_cast<uint64_t>(st.st_size)
                 : S_ISLNK(st.st_mode) && st.st_size < 60 ? 0  // inline in the inode
                                                          : 4096;
    t.bytes += (b + 4095) / 4096 * 4096;
  }
  return t;
}

Status makeExt4(const std::string& mkfs, const std::string& root, const TreeSize& size,
                const std::string& out) {
  // Room for the journal, the block groups' metadata and a little writing
  // before a sandbox grows the disk; the file is sparse, so room is free.
  uint64_t mib = (size.bytes + size.bytes / 4) / (1 << 20) + 128;
  // The default ratio (one inode per 16 KiB) unless the image has more
  // files than that gives (small files, e.g. node_modules).
  uint64_t inodes = size.entries + size.entries / 4 + 8192;
  std::vector<std::string> argv = {mkfs,   "-q", "-F",      "-L", "vessel-root",   "-b",
                                   "4096", "-T", "default", "-E", "root_owner=0:0"};
  if (inodes > mib * 64) {
    argv.push_back("-N");
    argv.push_back(std::to_string(inodes));
  }
  argv.insert(argv.end(), {"-d", root, out, std::to_string(mib) + "M"});
  auto r = os::runCommand(argv, {}, std::chrono::minutes(10));
  if (!r.ok()) return std::move(r).error().withContext("make the image's ext4 filesystem");
  return okStatus();
}

}  // namespace vessel::images
