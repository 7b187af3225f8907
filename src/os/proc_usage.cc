#include "os/proc_usage.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <string>

#include "base/fd.h"

namespace vessel::os {

namespace {

Result<std::string> readSmall(const std::string& path) {
  VESSEL_ASSIGN_OR_RETURN(Fd fd, Fd::open(path, O_RDONLY));
  std::string out(8192, '\0');
  ssize_t n = ::read(fd.get(), out.data(), out.size());
  if (n < 0) return Error::fromErrno("read " + path);
  out.resize(static_cast<size_t>(n));
  return out;
}

bool number(std::string_view s, uint64_t& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

Result<StatTicks> parseStatTicks(std::string_view stat) {
  // "pid (comm) state ppid ..." : fields after the last ')' start at field 3;
  // utime and stime are fields 14 and 15, starttime field 22.
  auto close = stat.rfind(')');
  if (close == std::string_view::npos) return Error(Code::kProtocol, "stat: no comm field");
  std::string_view rest = stat.substr(close + 1);
  uint64_t utime = 0, stime = 0;
  StatTicks t;
  int field = 2;
  while (!rest.empty() && field < 22) {
    auto start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    rest = rest.substr(start);
    auto end = rest.find(' ');
    std::string_view tok = rest.substr(0, end);
    ++field;
    if (field == 14 && !number(tok, utime)) return Error(Code::kProtocol, "stat: bad utime");
    if (field == 15 && !number(tok, stime)) return Error(Code::kProtocol, "stat: bad stime");
    if (field == 22 && !number(tok, t.start)) return Error(Code::kProtocol, "stat: bad starttime");
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  }
  if (field < 22) return Error(Code::kProtocol, "stat: too few fields");
  t.cpu = utime + stime;
  return t;
}

Result<uint64_t> uptimeTicks() {
  VESSEL_ASSIGN_OR_RETURN(std::string up, readSmall("/proc/uptime"));
  auto dot = up.find('.');
  auto space = up.find(' ');
  if (dot == std::string::npos || space == std::string::npos || dot > space)
    return Error(Code::kProtocol, "/proc/uptime: unexpected text");
  uint64_t secs = 0, frac = 0;
  if (!number(std::string_view(up).substr(0, dot), secs) ||
      !number(std::string_view(up).substr(dot + 1, space - dot - 1), frac))
    return Error(Code::kProtocol, "/proc/uptime: unexpected text");
  uint64_t hz = static_cast<uint64_t>(::sysconf(_SC_CLK_TCK));
  return secs * hz + frac * hz / 100;
}

Result<uint64_t> parseStatusRssBytes(std::string_view status) {
  constexpr std::string_view kKey = "\nVmRSS:";
  auto at = status.find(kKey);
  if (at == std::string_view::npos) return uint64_t{0};  // a kernel thread or a zombie
  std::string_view line = status.substr(at + kKey.size());
  line = line.substr(0, line.find('\n'));
  auto start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos) return Error(Code::kProtocol, "status: empty VmRSS");
  line = line.substr(start);
  auto space = line.find(' ');
  uint64_t kb = 0;
  if (!number(line.substr(0, space), kb) || line.substr(space + 1) != "kB")
    return Error(Code::kProtocol, "status: bad VmRSS");
  return kb * 1024;
}

Result<ProcUsage> procUsage(pid_t pid) {
  std::string base = "/proc/" + std::to_string(pid);
  VESSEL_ASSIGN_OR_RETURN(std::string stat, readSmall(base + "/stat"));
  VESSEL_ASSIGN_OR_RETURN(std::string status, readSmall(base + "/status"));
  ProcUsage u;
  VESSEL_ASSIGN_OR_RETURN(StatTicks t, parseStatTicks(stat));
  u.cpu_ticks = t.cpu;
  u.start_ticks = t.start;
  VESSEL_ASSIGN_OR_RETURN(u.rss_bytes, parseStatusRssBytes(status));
  return u;
}

}  // namespace vessel::os
