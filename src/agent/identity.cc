#include "agent/identity.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/random.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

namespace vessel::agent {

using agentproto::MsgType;

namespace {

Result<std::string> slurp(const std::string& path, size_t max) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::fromErrno("open " + path);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max) break;
  }
  ::close(fd);
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

void setVar(std::vector<std::string>& env, const std::string& kv) {
  size_t eq = kv.find('=');
  std::string key = kv.substr(0, eq == std::string::npos ? kv.size() : eq + 1);
  for (auto& e : env) {
    if (e.compare(0, key.size(), key) == 0) {
      e = kv;
      return;
    }
  }
  env.push_back(kv);
}

Result<in_addr> parseIpv4(const std::string& s, const char* what) {
  in_addr a{};
  if (::inet_pton(AF_INET, s.c_str(), &a) != 1)
    return Error(Code::kInvalidArgument, std::string(what) + " is not an IPv4 address: " + s);
  return a;
}

sockaddr ipv4Sockaddr(in_addr a) {
  sockaddr out{};
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr = a;
  static_assert(sizeof in <= sizeof out);
  std::memcpy(&out, &in, sizeof in);
  return out;
}

Status writeWhole(const char* path, const std::string& content) {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Error::fromErrno(std::string("open ") + path);
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return Error::fromErrno(std::string("write ") + path, e);
    }
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  return okStatus();
}

// SetNetwork with the classic inet ioctls: no netlink code, no child
// process (an `ip` exec costs hundreds of milliseconds under TCG).
Status setNetwork(const agentproto::SetNetworkMsg& m) {
  if (m.iface.empty() || m.iface.size() >= IFNAMSIZ)
    return Error(Code::kInvalidArgument, "bad interface name '" + m.iface + "'");
  bool up = m.flags & agentproto::SetNetworkMsg::kUp;
  in_addr addr{}, mask{}, gw{};
  if (up) {
    auto slash = m.address.find('/');
    if (slash == std::string::npos)
      return Error(Code::kInvalidArgument, "address needs a /prefix: " + m.address);
    VESSEL_ASSIGN_OR_RETURN(addr, parseIpv4(m.address.substr(0, slash), "address"));
    int prefix = -1;
    try {
      prefix = std::stoi(m.address.substr(slash + 1));
    } catch (...) {
    }
    if (prefix < 1 || prefix > 32)
      return Error(Code::kInvalidArgument, "bad prefix length in " + m.address);
    mask.s_addr = htonl(prefix == 32 ? 0xffffffffu : ~(0xffffffffu >> prefix));
    VESSEL_ASSIGN_OR_RETURN(gw, parseIpv4(m.gateway, "gateway"));
    if (auto ns = parseIpv4(m.nameserver, "nameserver"); !ns.ok()) return ns.error();
  }
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Error::fromErrno("socket");
  auto fail = [s](const std::string& what) {
    int e = errno;
    ::close(s);
    return Error::fromErrno(what, e);
  };
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, m.iface.data(), m.iface.size());
  if (up) {
    ifr.ifr_addr = ipv4Sockaddr(addr);
    if (::ioctl(s, SIOCSIFADDR, &ifr) != 0) return fail("set address of " + m.iface);
    ifr.ifr_netmask = ipv4Sockaddr(mask);
    if (::ioctl(s, SIOCSIFNETMASK, &ifr) != 0) return fail("set netmask of " + m.iface);
  } else {
    // 0.0.0.0 removes the interface's address (as `ifconfig IF 0.0.0.0`).
    ifr.ifr_addr = ipv4Sockaddr(in_addr{});
    if (::ioctl(s, SIOCSIFADDR, &ifr) != 0 && errno != EADDRNOTAVAIL)
      return fail("remove address of " + m.iface);
  }
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) return fail("flags of " + m.iface);
  short flags =
      up ? static_cast<short>(ifr.ifr_flags | IFF_UP) : static_cast<short>(ifr.ifr_flags & ~IFF_UP);
  ifr.ifr_flags = flags;
  if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) return fail("set flags of " + m.iface);
  if (up) {
    // `ip route replace default`: every old default route on the
    // interface goes first (no gateway given: any gateway matches).
    rtentry rt{};
    rt.rt_dst = ipv4Sockaddr(in_addr{});
    rt.rt_genmask = ipv4Sockaddr(in_addr{});
    rt.rt_flags = RTF_UP;
    std::string dev = m.iface;
    rt.rt_dev = dev.data();
    for (int i = 0; i < 64 && ::ioctl(s, SIOCDELRT, &rt) == 0; ++i) {
    }
    rt.rt_gateway = ipv4Sockaddr(gw);
    rt.rt_flags = RTF_UP | RTF_GATEWAY;
    if (::ioctl(s, SIOCADDRT, &rt) != 0) return fail("add default route via " + m.gateway);
  }
  ::close(s);
  return writeWhole("/etc/resolv.conf", up ? "nameserver " + m.nameserver + "\n" : "");
}

// From the kernel's fs/ext4/ext4.h (not in the uapi headers).
constexpr unsigned long kExt4IocResizeFs = _IOW('f', 16, uint64_t);
constexpr long kExt4SuperMagic = 0xEF53;

// The root filesystem grown to its block device, once the device shows
// the size the host gave it: the virtio config change that carries the new
// capacity is handled by a kernel worker, so it may land just after the
// host's call. Bounded at 5 s; the agent does nothing else meanwhile,
// which is fine on the create path, the only one that sends this.
Status growRootFs(uint64_t want_bytes) {
  struct stat st {};
  if (::stat("/", &st) != 0) return Error::fromErrno("stat /");
  std::string size_path = "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                          std::to_string(minor(st.st_dev)) + "/size";
  uint64_t bytes = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    auto text = slurp(size_path, 64);
    if (!text.ok()) return std::move(text).error();
    bytes = std::strtoull(text->c_str(), nullptr, 10) * 512;  // sysfs counts 512-byte sectors
    if (bytes >= want_bytes) break;
    if (std::chrono::steady_clock::now() > deadline)
      return Error(Code::kDeadlineExceeded, "root block device has " + std::to_string(bytes) +
                                                " bytes, not the " + std::to_string(want_bytes) +
                                                " the host gave it");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  struct statfs fs {};
  if (::statfs("/", &fs) != 0) return Error::fromErrno("statfs /");
  if (fs.f_type != kExt4SuperMagic)
    return Error(Code::kFailedPrecondition, "the root filesystem is not ext4");
  uint64_t blocks = bytes / static_cast<uint64_t>(fs.f_bsize);
  int fd = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Error::fromErrno("open /");
  // Online grow; the same size is a no-op, a smaller one EINVAL.
  int rc = ::ioctl(fd, kExt4IocResizeFs, &blocks);
  int e = errno;
  ::close(fd);
  if (rc != 0)
    return Error::fromErrno("EXT4_IOC_RESIZE_FS to " + std::to_string(blocks) + " blocks", e);
  return okStatus();
}

}  // namespace

Result<UserInfo> Identity::lookupUser(const std::string& name) const {
  auto text = slurp(passwd_path_, 1 << 20);
  if (text.ok()) {
    for (const auto& line : split(*text, '\n')) {
      auto f = split(line, ':');
      if (f.size() < 7 || f[0] != name) continue;
      UserInfo u;
      u.name = f[0];
      u.uid = static_cast<uid_t>(std::strtoul(f[2].c_str(), nullptr, 10));
      u.gid = static_cast<gid_t>(std::strtoul(f[3].c_str(), nullptr, 10));
      u.home = f[5].empty() ? "/" : f[5];
      u.shell = f[6].empty() ? "/bin/sh" : f[6];
      return u;
    }
  }
  if (name == "root") return UserInfo{"root", 0, 0, "/root", "/bin/sh"};
  // A number, as a Dockerfile's `USER 1000` names one: its account if the
  // file has one, else the bare uid with group 0, as docker runs it.
  bool digits = !name.empty() && name.size() <= 9;
  for (char c : name) digits &= c >= '0' && c <= '9';
  if (digits) {
    auto uid = static_cast<uid_t>(std::strtoul(name.c_str(), nullptr, 10));
    if (text.ok())
      for (const auto& line : split(*text, '\n')) {
        auto f = split(line, ':');
        if (f.size() < 7 || f[2] != name) continue;
        return UserInfo{f[0], uid, static_cast<gid_t>(std::strtoul(f[3].c_str(), nullptr, 10)),
                        f[5].empty() ? "/" : f[5], f[6].empty() ? "/bin/sh" : f[6]};
      }
    return UserInfo{name, uid, 0, "/", "/bin/sh"};
  }
  return Error(Code::kNotFound, "user " + name + " not in " + passwd_path_);
}

std::vector<std::string> Identity::processEnv(const UserInfo& u, bool pty,
                                              const std::vector<std::string>& extra) const {
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "HOME=" + u.home,
      "USER=" + u.name,
      "LOGNAME=" + u.name,
      "SHELL=" + u.shell,
  };
  if (pty) env.push_back("TERM=xterm-256color");
  for (const auto& kv : default_env_) setVar(env, kv);
  for (const auto& kv : extra) setVar(env, kv);
  return env;
}

void Identity::handle(Channel& ch, uint32_t stream, const agentproto::Frame& f) {
  switch (f.type) {
    case MsgType::kSetHostname: {
      auto m = agentproto::decodeMsg<agentproto::SetHostnameMsg>(f.payload);
      if (!m.ok()) return ch.sendError(stream, m.error());
      if (::sethostname(m->name.data(), m->name.size()) != 0)
        return ch.sendError(stream, Error::fromErrno("sethostname " + m->name));
      return ch.sendOk(stream);
    }
    case MsgType::kSetClock: {
      auto m = agentproto::decodeMsg<agentproto::SetClockMsg>(f.payload);
      if (!m.ok()) return ch.sendError(stream, m.error());
      timespec ts{static_cast<time_t>(m->unix_ns / 1000000000),
                  static_cast<long>(m->unix_ns % 1000000000)};
      if (m->unix_ns < 0 || ::clock_settime(CLOCK_REALTIME, &ts) != 0)
        return ch.sendError(stream,
                            Error::fromErrno("clock_settime", m->unix_ns < 0 ? EINVAL : errno));
      return ch.sendOk(stream);
    }
    case MsgType::kAddEntropy: {
      auto m = agentproto::decodeMsg<agentproto::AddEntropyMsg>(f.payload);
      if (!m.ok()) return ch.sendError(stream, m.error());
      int fd = ::open("/dev/random", O_WRONLY | O_CLOEXEC);
      if (fd < 0) return ch.sendError(stream, Error::fromErrno("open /dev/random"));
      // rand_pool_info ends in a flexible array: allocate header + data.
      std::string buf(sizeof(rand_pool_info) + m->bytes.size(), '\0');
      // SAFETY: buf is sized for the header plus the payload and outlives the ioctl.
      auto* info = reinterpret_cast<rand_pool_info*>(buf.data());
      info->entropy_count = static_cast<int>(m->bytes.size() * 8);
      info->buf_size = static_cast<int>(m->bytes.size());
      std::memcpy(buf.data() + sizeof(rand_pool_info), m->bytes.data(), m->bytes.size());
      int rc = ::ioctl(fd, RNDADDENTROPY, info);
      int e = errno;
      // Credited entropy alone does not reseed an already-initialised CRNG
      // until its next scheduled reseed: clones restored from one snapshot
      // would share /dev/urandom output until then. Force it now.
      if (rc == 0) {
        rc = ::ioctl(fd, RNDRESEEDCRNG);
        e = errno;
      }
      ::close(fd);
      if (rc != 0) return ch.sendError(stream, Error::fromErrno("RNDADDENTROPY/RNDRESEEDCRNG", e));
      return ch.sendOk(stream);
    }
    case MsgType::kSetEnv: {
      auto m = agentproto::decodeMsg<agentproto::SetEnvMsg>(f.payload);
      if (!m.ok()) return ch.sendError(stream, m.error());
      for (const auto& kv : m->env)
        if (kv.find('=') == std::string::npos || kv[0] == '=')
          return ch.sendError(stream,
                              Error(Code::kInvalidArgument, "env entry without KEY=: " + kv));
      default_env_ = std::move(m->env);
      return ch.sendOk(stream);
    }
    case MsgType::kSetNetwork: {
      auto m = agentproto::decodeMsg<agentproto::SetNetworkMsg>(f.payload);
      if (!m.ok()) return ch.sendError(stream, m.error());
      if (Status s = setNetwork(*m); !s.ok()) return ch.sendError(stream, s.error());
      return ch.sendOk(stream);
    }
    case MsgType::kGrowRootFs: {
      auto m = agentproto::decodeMsg<agentproto::GrowRootFsMsg>(f.payload);
      if (!m.ok()) return ch.sendError(stream, m.error());
      if (Status s = growRootFs(m->device_bytes); !s.ok()) return ch.sendError(stream, s.error());
      return ch.sendOk(stream);
    }
    default: return ch.sendError(stream, Error(Code::kInvalidArgument, "not an identity request"));
  }
}

}  // namespace vessel::agent
