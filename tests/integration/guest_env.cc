#include "guest_env.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "base/fd.h"

namespace vessel::testing {

namespace fs = std::filesystem;

namespace {
std::string requireEnv(const char* name) {
  const char* v = ::getenv(name);
  if (!v || !*v) {
    ADD_FAILURE() << name << " is not set; run the guest tests through `make test`";
    return "/nonexistent/" + std::string(name);
  }
  return v;
}
}  // namespace

std::string kernelPath() { return requireEnv("VESSEL_KERNEL"); }
std::string minimalImage() { return requireEnv("VESSEL_MINIMAL_IMAGE"); }

ScratchDir::ScratchDir() {
  char tmpl[] = "/tmp/vessel-test-XXXXXX";
  char* p = ::mkdtemp(tmpl);
  path_ = p ? p : "/tmp/vessel-test-failed";
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::vector<std::string> ScratchDir::files() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path_, ec); it != fs::end(it); it.increment(ec))
    out.push_back(fs::relative(it->path(), path_).string());
  return out;
}

hypervisor::MachineSpec minimalSpec(const std::string& id, const ScratchDir& dir) {
  hypervisor::MachineSpec s;
  s.id = id;
  s.vcpus = 1;
  s.memory_mib = 256;
  s.accel = hypervisor::Accel::kTcg;
  s.kernel = kernelPath();
  s.cmdline = "init=/sbin/vessel-agent";
  s.disks = {{minimalImage(), true, "raw"}};
  s.run_dir = dir.path() + "/" + id;
  s.console_log = dir.path() + "/" + id + ".console.log";
  return s;
}

namespace {
// Every process whose NUL-separated command line satisfies `match`.
template <class Match>
std::vector<int> processesWhere(Match match) {
  std::vector<int> pids;
  DIR* d = ::opendir("/proc");
  if (!d) return pids;
  while (dirent* e = ::readdir(d)) {
    int pid = ::atoi(e->d_name);
    if (pid <= 0) continue;
    auto cmd = readFile(std::string("/proc/") + e->d_name + "/cmdline", 1 << 20);
    if (cmd.ok() && match(*cmd)) pids.push_back(pid);
  }
  ::closedir(d);
  return pids;
}
}  // namespace

std::vector<int> qemuProcessesFor(const std::string& prefix) {
  std::string needle = std::string("-name") + '\0' + "vessel-" + prefix;
  return processesWhere([&](const std::string& cmd) { return cmd.find(needle) != cmd.npos; });
}

std::vector<int> qemuProcessesUsing(const std::string& path) {
  return processesWhere([&](const std::string& cmd) {
    return cmd.rfind("qemu-system", 0) == 0 && cmd.find(path) != cmd.npos;
  });
}

uint16_t freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace vessel::testing
