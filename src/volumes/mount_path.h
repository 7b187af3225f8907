#pragma once
// Where a volume may be mounted in a guest: the one rule of every front
// end that takes mounts at sandbox create (the native API's `volumes`,
// E2B's `volumeMounts`), header only so that their request parsers stay
// free of the host's volume code.
#include <cstddef>
#include <string_view>

namespace vessel::volumes {

// The most volumes one sandbox mounts.
constexpr size_t kMaxSandboxMounts = 16;

// Whether `path` may be a mount point in a guest: absolute, at most 255
// bytes, no empty, "." or ".." component, no trailing '/', no NUL or ','
// (a mount option's separator), not "/" and not in /proc, /sys or /dev
// (the guest's own).
inline bool validMountPath(std::string_view path) {
  if (path.size() < 2 || path.size() > 255 || path[0] != '/' || path.back() == '/') return false;
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view c = path.substr(pos, slash - pos);
    if (c.empty() || c == "." || c == "..") return false;
    for (char ch : c)
      if (ch == '\0' || ch == ',') return false;
    pos = slash + 1;
  }
  for (std::string_view own : {"/proc", "/sys", "/dev"})
    if (path == own || (path.substr(0, own.size()) == own && path[own.size()] == '/')) return false;
  return true;
}

// Whether two mount points are one or lie one inside the other.
inline bool mountPathsOverlap(std::string_view a, std::string_view b) {
  auto within = [](std::string_view inner, std::string_view outer) {
    return inner == outer || (inner.size() > outer.size() &&
                              inner.substr(0, outer.size()) == outer && inner[outer.size()] == '/');
  };
  return within(a, b) || within(b, a);
}

}  // namespace vessel::volumes
