#include "agent/pid1.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "agent/ports.h"

namespace vessel::agent {

namespace {
void mountOne(const char* src, const char* target, const char* type, unsigned long flags,
              const char* data) {
  ::mkdir(target, 0755);
  if (::mount(src, target, type, flags, data) != 0 && errno != EBUSY)
    std::fprintf(stderr, "vessel-agent: mount %s on %s: %s\n", type, target, std::strerror(errno));
}
}  // namespace

void mountBasics() {
  mountOne("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  mountOne("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  mountOne("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
  mountOne("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=620,ptmxmode=666");
  // /tmp lives on the root disk, not in RAM: a sandbox's disk size (the
  // host grows it, GrowRootFs) is what its uploads and builds can use, and
  // a guest's temporary files never eat its memory. Only a read-only root
  // (tests booting an image as is) gets a tmpfs.
  struct statvfs root {};
  if (::statvfs("/", &root) == 0 && (root.f_flag & ST_RDONLY))
    mountOne("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  mountOne("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755");
  mountOne("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  // devtmpfs may lack /dev/ptmx pointing at the devpts instance above.
  if (::access("/dev/ptmx", F_OK) != 0) ::symlink("pts/ptmx", "/dev/ptmx");
  // localhost works in the guest (and for sandbox ports, agent/ports.h).
  bringLoopbackUp();
  // The image's hostname until the host sets one (SetHostname).
  int fd = ::open("/etc/hostname", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char name[65] = {};
    ssize_t n = ::read(fd, name, sizeof name - 1);
    ::close(fd);
    while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == ' ')) --n;
    if (n > 0) ::sethostname(name, static_cast<size_t>(n));
  }
}

std::string findPort(const std::string& name) {
  DIR* d = ::opendir("/sys/class/virtio-ports");
  if (!d) return "";
  std::string found;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string p = std::string("/sys/class/virtio-ports/") + e->d_name + "/name";
    char buf[64] = {};
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\0')) buf[--n] = '\0';
    if (n > 0 && name == buf) {
      found = std::string("/dev/") + e->d_name;
      break;
    }
  }
  ::closedir(d);
  return found;
}

}  // namespace vessel::agent
