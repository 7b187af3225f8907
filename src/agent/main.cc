// vessel-agent: PID 1 inside every sandbox. This first version mounts the
// basic filesystems, opens the agent channel, announces itself with a Hello
// frame (the host's "ready" signal) and answers pings; the process, file and
// identity services are added on top of the same channel.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "agentproto/frame.h"

namespace {

using vessel::agentproto::MsgType;

constexpr const char* kPortName = "vessel.agent";

void logLine(const char* msg) {
  // The console is the only place a guest-side failure can be seen.
  std::fprintf(stderr, "vessel-agent: %s\n", msg);
}

void mountBasics() {
  ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  ::mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  ::mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, nullptr);
  ::mkdir("/dev/pts", 0755);
  ::mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=620,ptmxmode=666");
  ::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  ::mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755");
}

// There is no udev: find the port's /dev node by its name in sysfs.
std::string findPort() {
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
    if (n > 0 && std::strncmp(buf, kPortName, std::strlen(kPortName)) == 0) {
      found = std::string("/dev/") + e->d_name;
      break;
    }
  }
  ::closedir(d);
  return found;
}

bool writeAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

void reapAll() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

}  // namespace

int main() {
  if (::getpid() == 1) mountBasics();
  ::signal(SIGPIPE, SIG_IGN);
  std::string port;
  for (int i = 0; i < 500 && (port = findPort()).empty(); ++i) ::usleep(10000);
  if (port.empty()) {
    logLine("agent port not found");
  }
  int fd = port.empty() ? -1 : ::open(port.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) logLine("cannot open agent port");
  vessel::agentproto::Hello hello;
  hello.agent_version = "vessel-agent/0.1";
  if (fd >= 0 &&
      !writeAll(fd, vessel::agentproto::encodeFrame(MsgType::kHello, 0,
                                                    vessel::agentproto::encodeHello(hello))))
    logLine("cannot write hello");
  vessel::agentproto::FrameDecoder dec;
  char buf[65536];
  for (;;) {
    reapAll();
    if (fd < 0) {
      ::pause();
      continue;
    }
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) {
      // Host side disconnected: reads return EOF until it reconnects.
      ::usleep(50000);
      continue;
    }
    if (!dec.feed(std::string_view(buf, static_cast<size_t>(n))).ok()) break;
    for (;;) {
      auto f = dec.next();
      if (!f.ok() || !f->has_value()) break;
      if ((*f)->type == MsgType::kPing)
        writeAll(fd, vessel::agentproto::encodeFrame(MsgType::kPong, (*f)->stream, (*f)->payload));
    }
  }
  // PID 1 must never exit (the kernel would panic); idle instead.
  for (;;) {
    reapAll();
    ::pause();
  }
}
