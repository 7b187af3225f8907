#include "hostile_footprint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <sstream>

#include "base/child_process.h"
#include "base/fd.h"
#include "base/sha256.h"

namespace vessel::testing {

namespace fs = std::filesystem;

namespace {

std::string field(const std::string& text, const std::string& key) {
  auto at = text.find("\n" + key);
  if (at == std::string::npos) return "";
  at += key.size() + 1;
  return text.substr(at, text.find('\n', at) - at);
}

}  // namespace

bool Footprint::complete() const {
  return qemu > 0 && !vm_dir.empty() && !netns.empty() && !jail_dir.empty() && !lease.empty() &&
         !cgroups.empty() && !memory_cgroup.empty();
}

std::string Footprint::describe() const {
  std::ostringstream o;
  o << id << ": qemu " << qemu << ", vm " << vm_dir << ", netns " << netns << ", jail " << jail_dir
    << ", lease " << lease << ", " << cgroups.size() << " cgroups";
  return o.str();
}

Footprint footprintOf(const Vesseld& d, const std::string& id) {
  Footprint f;
  f.id = id;
  f.sandbox_dir = d.stateDir() + "/runtime/sandboxes/" + id;
  auto rec = readFile(f.sandbox_dir + "/sandbox.json");
  if (!rec.ok()) return f;
  boost::system::error_code ec;
  auto v = boost::json::parse(*rec, ec);
  if (ec || !v.is_object()) return f;
  const auto& o = v.as_object();
  f.vm_dir = str(v, "vm_dir");
  if (const auto* p = o.if_contains("vm_pid")) f.qemu = static_cast<pid_t>(p->to_number<int64_t>());
  // vesseld names slot namespaces "v<sha256(state dir)[:4]>-<slot>".
  if (const auto* s = o.if_contains("network_slot"))
    f.netns = "/run/netns/v" + sha256Hex(d.stateDir()).substr(0, 4) + "-" +
              std::to_string(s->to_number<int64_t>());
  std::string proc = "/proc/" + std::to_string(f.qemu);
  auto status = readFile(proc + "/status", 1 << 16);
  if (status.ok()) {
    std::string uid = field(*status, "Uid:\t");
    if (!uid.empty()) f.lease = "/run/vessel/uids/" + std::to_string(std::stoul(uid));
  }
  // "4:memory:/vessel/NAME" (v1) or "0::/vessel/NAME" (v2).
  auto cg = readFile(proc + "/cgroup", 1 << 16);
  bool v2 = fs::exists("/sys/fs/cgroup/cgroup.controllers");
  std::istringstream lines(cg.ok() ? *cg : "");
  for (std::string line; std::getline(lines, line);) {
    auto c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    std::string ctrl = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
    if (path.rfind("/vessel/", 0) != 0) continue;
    std::string base = ctrl.empty() ? (v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified")
                                    : "/sys/fs/cgroup/" + ctrl;
    f.cgroups.push_back(base + path);
    if (ctrl == "memory" || (ctrl.empty() && v2)) f.memory_cgroup = base + path;
    f.jail_dir = d.stateDir() + "/jail/" + fs::path(path).filename().string();
  }
  return f;
}

void expectGone(const Footprint& f) {
  auto cmd = processCmdline(f.qemu);
  EXPECT_FALSE(cmd.ok() && cmd->find(f.vm_dir) != std::string::npos)
      << f.id << ": its QEMU " << f.qemu << " still runs";
  for (const auto& c : f.cgroups) EXPECT_FALSE(fs::exists(c)) << f.id << ": cgroup " << c;
  for (const auto& p : {f.jail_dir, f.lease, f.netns, f.vm_dir, f.sandbox_dir})
    EXPECT_FALSE(fs::exists(p)) << f.id << ": " << p << " is left";
}

uint64_t allocatedUnder(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto it =
           fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
      bytes += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return bytes;
}

uint64_t rssKib(pid_t pid) {
  auto status = readFile("/proc/" + std::to_string(pid) + "/status", 1 << 16);
  if (!status.ok()) return 0;
  std::string v = field(*status, "VmRSS:");
  return v.empty() ? 0 : std::stoull(v);
}

int64_t hostOomKills(const std::string& memory_cgroup) {
  for (const char* file : {"/memory.oom_control", "/memory.events"}) {
    auto text = readFile(memory_cgroup + file, 1 << 16);
    if (!text.ok()) continue;
    std::string v = field("\n" + *text, "oom_kill ");
    if (!v.empty()) return std::stoll(v);
  }
  return -1;
}

}  // namespace vessel::testing
