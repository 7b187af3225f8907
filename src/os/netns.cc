#include "os/netns.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "base/log.h"
#include "os/command.h"

namespace vessel::os {

namespace {
const Logger& logger() {
  static const Logger* l = new Logger("netns");  // NOLINT: trivially leaked, no dtor order issue
  return *l;
}
}  // namespace

std::vector<std::string> inNetns(const std::string& netns, std::vector<std::string> argv) {
  if (netns.empty()) return argv;
  std::vector<std::string> out{"ip", "netns", "exec", netns};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

Netns& Netns::operator=(Netns&& o) noexcept {
  if (this != &o) {
    destroy();
    name_ = std::exchange(o.name_, std::string());
  }
  return *this;
}

Result<Netns> Netns::create(const std::string& name) {
  if (name.empty() || name.size() > 64 || name.find('/') != std::string::npos) {
    return Error(Code::kInvalidArgument, "bad netns name " + name);
  }
  VESSEL_TRY_CTX(runCommand({"ip", "netns", "add", name}), "create netns " + name);
  Netns ns(name);  // owns it from here: any failure below deletes it
  VESSEL_TRY_CTX(runCommand({"ip", "-n", name, "link", "set", "lo", "up"}), "netns " + name);
  return ns;
}

Result<Netns> Netns::adopt(const std::string& name) {
  if (name.empty() || name.size() > 64 || name.find('/') != std::string::npos) {
    return Error(Code::kInvalidArgument, "bad netns name " + name);
  }
  if (!exists(name)) return Error(Code::kNotFound, "netns " + name + " does not exist");
  return Netns(name);
}

bool Netns::exists(const std::string& name) {
  return !name.empty() && ::access(("/run/netns/" + name).c_str(), F_OK) == 0;
}

std::vector<std::string> Netns::wrap(std::vector<std::string> argv) const {
  return inNetns(name_, std::move(argv));
}

Status Netns::run(std::vector<std::string> argv, std::string_view input) const {
  VESSEL_TRY_CTX(runCommand(wrap(std::move(argv)), input), "in netns " + name_);
  return okStatus();
}

Status Netns::sysctl(const std::string& key, const std::string& value) const {
  return run({"sysctl", "-q", "-w", key + "=" + value});
}

void Netns::destroy() {
  if (name_.empty()) return;
  auto r = runCommand({"ip", "netns", "del", name_});
  if (!r.ok()) logger().warn("delete netns {}: {}", name_, r.error().message());
  name_.clear();
}

Status nftApply(const std::string& netns, std::string_view ruleset) {
  VESSEL_TRY_CTX(runCommand(inNetns(netns, {"nft", "-f", "-"}), ruleset),
                 "nftables in " + (netns.empty() ? std::string("host") : netns));
  return okStatus();
}

NftTable& NftTable::operator=(NftTable&& o) noexcept {
  if (this != &o) {
    destroy();
    netns_ = std::move(o.netns_);
    family_ = std::move(o.family_);
    name_ = std::exchange(o.name_, std::string());
  }
  return *this;
}

void NftTable::destroy() {
  if (name_.empty()) return;
  auto r = runCommand(inNetns(netns_, {"nft", "delete", "table", family_, name_}));
  if (!r.ok()) logger().warn("delete nft table {} {}: {}", family_, name_, r.error().message());
  name_.clear();
}

Link& Link::operator=(Link&& o) noexcept {
  if (this != &o) {
    destroy();
    netns_ = std::move(o.netns_);
    name_ = std::exchange(o.name_, std::string());
  }
  return *this;
}

void Link::destroy() {
  if (name_.empty()) return;
  std::vector<std::string> argv{"ip"};
  if (!netns_.empty()) argv.insert(argv.end(), {"-n", netns_});
  argv.insert(argv.end(), {"link", "del", name_});
  auto r = runCommand(argv);
  if (!r.ok()) logger().warn("delete link {}: {}", name_, r.error().message());
  name_.clear();
}

Result<Link> createVeth(const std::string& netns_a, const std::string& a,
                        const std::string& netns_b, const std::string& b) {
  if (a.empty() || a.size() >= IFNAMSIZ || b.empty() || b.size() >= IFNAMSIZ) {
    return Error(Code::kInvalidArgument, "bad veth names " + a + ", " + b);
  }
  std::vector<std::string> argv{"ip", "link", "add", a};
  if (!netns_a.empty()) argv.insert(argv.end(), {"netns", netns_a});
  argv.insert(argv.end(), {"type", "veth", "peer", "name", b});
  if (!netns_b.empty()) argv.insert(argv.end(), {"netns", netns_b});
  VESSEL_TRY_CTX(runCommand(argv), "create veth " + a + "/" + b);
  return Link(netns_a, a);
}

Result<Fd> openTap(const std::string& netns_path, const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ) {
    return Error(Code::kInvalidArgument, "bad tap name " + name);
  }
  // A tun device belongs to the namespace of the task that opens it, so the
  // open happens on a short-lived thread moved into the namespace; the
  // calling thread's namespace never changes.
  Result<Fd> result = Error(Code::kInternal, "tap thread did not run");
  std::thread t([&] {
    Result<Fd> ns = Fd::open(netns_path, O_RDONLY | O_CLOEXEC);
    if (!ns.ok()) {
      result = std::move(ns).error();
      return;
    }
    if (::unshare(CLONE_FS) != 0 || ::setns(ns->get(), CLONE_NEWNET) != 0) {
      result = Error::fromErrno("enter netns " + netns_path);
      return;
    }
    Fd tun(::open("/dev/net/tun", O_RDWR | O_CLOEXEC));
    if (!tun) {
      result = Error::fromErrno("open /dev/net/tun");
      return;
    }
    ifreq ifr{};
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    if (::ioctl(tun.get(), TUNSETIFF, &ifr) != 0) {
      result = Error::fromErrno("TUNSETIFF " + name);
      return;
    }
    result = std::move(tun);
  });
  t.join();
  return result;
}

}  // namespace vessel::os
