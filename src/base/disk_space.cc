#include "base/disk_space.h"

#include <sys/statvfs.h>

namespace vessel {

Result<uint64_t> freeDiskMib(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return Error::fromErrno("statvfs " + dir);
  // f_bavail, not f_bfree: what is left once root's reserve is set aside.
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize >> 20;
}

Status checkFreeDisk(const std::string& dir, uint64_t min_mib, std::string_view what) {
  if (min_mib == 0) return okStatus();
  auto free_mib = freeDiskMib(dir);
  if (!free_mib.ok()) return std::move(free_mib).error().withContext(std::string(what));
  if (*free_mib >= min_mib) return okStatus();
  return Error(Code::kResourceExhausted,
               std::string(what) + " refused: the state disk is nearly full (" + dir + " has " +
                   std::to_string(*free_mib) + " MiB free, below the " + std::to_string(min_mib) +
                   " MiB kept free, --min-free-disk-mib); delete sandboxes or templates");
}

}  // namespace vessel
