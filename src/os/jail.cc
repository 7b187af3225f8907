#include "os/jail.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>

#include "base/fd.h"
#include "base/log.h"

namespace vessel::os {

namespace fs = std::filesystem;

Result<UidRange> parseUidRange(std::string_view s) {
  auto dash = s.find('-');
  UidRange r;
  auto bad = [&] {
    return Error(Code::kInvalidArgument, "uid range '" + std::string(s) + "': want FIRST-LAST");
  };
  if (dash == std::string_view::npos) return bad();
  auto a = std::from_chars(s.data(), s.data() + dash, r.first);
  auto b = std::from_chars(s.data() + dash + 1, s.data() + s.size(), r.last);
  if (a.ec != std::errc() || a.ptr != s.data() + dash || b.ec != std::errc() ||
      b.ptr != s.data() + s.size())
    return bad();
  if (r.first == 0 || r.last < r.first || r.last > (1u << 31)) return bad();
  return r;
}

// ---- Host ids ----

namespace {

constexpr size_t kMaxIdFileLines = 65536;
constexpr size_t kMaxIdLineBytes = 4096;

// Field `n` (0-based) of a ':'-separated line; npos-safe.
std::optional<std::string_view> field(std::string_view line, size_t n) {
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    size_t c = line.find(':', start);
    if (c == std::string_view::npos) return std::nullopt;
    start = c + 1;
  }
  size_t end = line.find(':', start);
  return line.substr(start, end == std::string_view::npos ? line.size() - start : end - start);
}

std::optional<uint32_t> number(std::optional<std::string_view> f) {
  uint32_t v = 0;
  if (!f || f->empty()) return std::nullopt;
  auto r = std::from_chars(f->data(), f->data() + f->size(), v);
  if (r.ec != std::errc() || r.ptr != f->data() + f->size()) return std::nullopt;
  return v;
}

}  // namespace

Result<std::vector<ClaimedIds>> parseIdFile(std::string_view text, bool sub,
                                            const std::string& name) {
  std::vector<ClaimedIds> out;
  size_t start = 0, line_no = 0;
  while (start < text.size()) {
    if (++line_no > kMaxIdFileLines)
      return Error(Code::kInvalidArgument, name + ": more than 65536 lines");
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    const std::string where = name + ":" + std::to_string(line_no);
    if (line.size() > kMaxIdLineBytes)
      return Error(Code::kInvalidArgument, where + ": line longer than 4096 bytes");
    if (line.empty() || line[0] == '#') continue;
    // NIS compat entries (+, -) name no id of their own.
    if (!sub && (line[0] == '+' || line[0] == '-')) continue;
    auto who = field(line, 0);
    auto bad = [&] { return Error(Code::kInvalidArgument, where + ": cannot read this line"); };
    if (sub) {
      // name:first:count, exactly three fields.
      auto first = number(field(line, 1)), count = number(field(line, 2));
      if (!first || !count || *count == 0 || field(line, 3)) return bad();
      uint64_t last = uint64_t{*first} + *count - 1;
      if (last > UINT32_MAX) return bad();
      out.push_back(
          {{*first, static_cast<uint32_t>(last)}, where + " (" + std::string(*who) + ")"});
    } else {
      auto id = number(field(line, 2));
      if (!id) return bad();
      out.push_back({{*id, *id}, where + " (" + std::string(*who) + ")"});
    }
  }
  return out;
}

Status checkUidRangeFree(UidRange range, const HostIdFiles& files) {
  const std::string ctx =
      "VM uid range " + std::to_string(range.first) + "-" + std::to_string(range.last);
  const std::pair<const std::string*, bool> sources[] = {
      {&files.passwd, false}, {&files.group, false}, {&files.subuid, true}, {&files.subgid, true}};
  for (const auto& [path, sub] : sources) {
    if (path->empty()) continue;
    auto text = readFile(*path, 16 << 20);
    if (!text.ok()) {
      if (text.error().sysErrno() == ENOENT) continue;
      return std::move(text).error().withContext(ctx);
    }
    VESSEL_ASSIGN_OR_RETURN(auto claims, parseIdFile(*text, sub, *path));
    for (const auto& c : claims)
      if (c.range.first <= range.last && range.first <= c.range.last)
        return Error(Code::kFailedPrecondition,
                     ctx + " overlaps ids " + std::to_string(c.range.first) + "-" +
                         std::to_string(c.range.last) + " of " + c.source +
                         ": a VM would own that account's files or share those ids; choose "
                         "another --vm-uid-range");
  }
  return okStatus();
}

// ---- UidPool ----

Result<std::shared_ptr<UidPool>> UidPool::open(UidRange range, std::string lease_dir,
                                               std::string owner, const HostIdFiles& host) {
  VESSEL_TRY(checkUidRangeFree(range, host));
  std::error_code ec;
  fs::create_directories(lease_dir, ec);
  if (ec) return Error(Code::kInternal, "create " + lease_dir + ": " + ec.message());
  fs::permissions(lease_dir, fs::perms::owner_all, ec);
  return std::shared_ptr<UidPool>(new UidPool(range, std::move(lease_dir), std::move(owner)));
}

Result<uint32_t> UidPool::allocate(const std::string& vm) {
  std::lock_guard lock(mu_);
  const uint64_t n = uint64_t{range_.last} - range_.first + 1;
  // Round robin from the last lease: a uid freed now is the last reused.
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t uid = next_;
    next_ = next_ == range_.last ? range_.first : next_ + 1;
    int fd = ::open(leasePath(uid).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      return Error::fromErrno("lease uid " + std::to_string(uid));
    }
    std::string line = owner_ + " " + vm + "\n";
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
    mine_.insert(uid);
    return uid;
  }
  return Error(Code::kResourceExhausted, "every uid of the VM range is leased");
}

Status UidPool::claim(uint32_t uid, const std::string& vm) {
  if (!contains(uid))
    return Error(Code::kInvalidArgument, "uid " + std::to_string(uid) + " is not in the VM range");
  std::lock_guard lock(mu_);
  // The lease file normally survived the restart; write it if not.
  int fd = ::open(leasePath(uid).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size == 0) {
      std::string line = owner_ + " " + vm + "\n";
      (void)!::write(fd, line.data(), line.size());
    }
    ::close(fd);
  }
  mine_.insert(uid);
  return okStatus();
}

void UidPool::free(uint32_t uid) {
  std::lock_guard lock(mu_);
  if (mine_.erase(uid)) ::unlink(leasePath(uid).c_str());
}

size_t UidPool::inUse() const {
  std::lock_guard lock(mu_);
  return mine_.size();
}

size_t UidPool::sweep() {
  // Which uids run a process now.
  std::set<uint32_t> live;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid != 0)
      live.insert(st.st_uid);
  }
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    uint32_t uid = 0;
    std::string name = e.path().filename().string();
    auto r = std::from_chars(name.data(), name.data() + name.size(), uid);
    if (r.ec != std::errc() || !contains(uid) || live.count(uid) || mine_.count(uid)) continue;
    auto text = readFile(e.path().string(), 4096);
    if (!text.ok() || text->rfind(owner_ + " ", 0) != 0) continue;
    if (::unlink(e.path().c_str()) == 0) ++n;
  }
  return n;
}

// ---- Jail ----

namespace {

// Ancestors of an absolute path, outermost first: /a/b/c -> /a, /a/b.
std::vector<std::string> ancestors(const std::string& p) {
  std::vector<std::string> out;
  for (size_t i = 1; i < p.size(); ++i)
    if (p[i] == '/') out.push_back(p.substr(0, i));
  return out;
}

Result<uint32_t> processUid(pid_t pid) {
  VESSEL_ASSIGN_OR_RETURN(std::string s,
                          readFile("/proc/" + std::to_string(pid) + "/status", 1 << 16));
  auto at = s.find("\nUid:");
  if (at == std::string::npos) return Error(Code::kInternal, "no Uid line");
  at += 5;
  while (at < s.size() && (s[at] == '\t' || s[at] == ' ')) ++at;
  uint32_t uid = 0;
  auto r = std::from_chars(s.data() + at, s.data() + s.size(), uid);
  if (r.ec != std::errc()) return Error(Code::kInternal, "bad Uid line");
  return uid;
}

}  // namespace

Status Jail::plan() {
  const std::string ctx = "jail " + spec_.id;
  std::set<std::string> made;
  std::vector<std::string> dir_mounts;
  // Device nodes first: each one's directory becomes a tmpfs that allows
  // devices (the root's does not), and files bound below it later (say
  // /dev/null) land on that tmpfs. Sealed read-only after the last step.
  std::vector<std::string> dev_dirs;
  for (const auto& d : spec_.devices) {
    const std::string parent = fs::path(d.path).parent_path().string();
    if (d.path.empty() || d.path[0] != '/' || d.path.find("/../") != std::string::npos ||
        parent.size() <= 1 || made.count(d.path))
      return Error(Code::kInvalidArgument, ctx + ": device path '" + d.path + "'");
    struct stat st {};
    if (::stat(d.path.c_str(), &st) != 0) return Error::fromErrno(ctx + ": " + d.path);
    if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
      return Error(Code::kInvalidArgument, ctx + ": " + d.path + " is not a device");
    if (std::find(dev_dirs.begin(), dev_dirs.end(), parent) == dev_dirs.end()) {
      for (const auto& a : ancestors(parent))
        if (made.insert(a).second) steps_.push_back({Step::kMkdir, dir_ + a, "", 0});
      made.insert(parent);
      steps_.push_back({Step::kMkdir, dir_ + parent, "", 0});
      steps_.push_back({Step::kDevTmpfs, dir_ + parent, "", 0});
      dev_dirs.push_back(parent);
    }
    made.insert(d.path);
    Step mk{Step::kMknod, dir_ + d.path, "", 0};
    mk.rdev = st.st_rdev;
    mk.mode = st.st_mode & S_IFMT;
    steps_.push_back(mk);
  }
  for (const auto& m : spec_.mounts) {
    if (m.path.empty() || m.path[0] != '/' || m.path.find("/../") != std::string::npos)
      return Error(Code::kInvalidArgument, ctx + ": mount path '" + m.path + "'");
    struct stat st {};
    if (::stat(m.path.c_str(), &st) != 0) return Error::fromErrno(ctx + ": " + m.path);
    // Already visible through a directory mounted before it.
    bool covered = false;
    for (const auto& d : dir_mounts)
      if (m.path == d || m.path.rfind(d + "/", 0) == 0) covered = true;
    if (covered || made.count(m.path)) continue;
    for (const auto& a : ancestors(m.path)) {
      if (made.insert(a).second) steps_.push_back({Step::kMkdir, dir_ + a, "", 0});
    }
    bool is_dir = S_ISDIR(st.st_mode);
    made.insert(m.path);
    steps_.push_back({is_dir ? Step::kMkdir : Step::kTouch, dir_ + m.path, "", 0});
    unsigned long f = MS_BIND | MS_REMOUNT | MS_NOSUID;
    if (!m.writable) f |= MS_RDONLY;
    if (!m.device) f |= MS_NODEV;
    if (!m.exec) f |= MS_NOEXEC;
    steps_.push_back({Step::kBind, dir_ + m.path, m.path, f});
    if (is_dir) dir_mounts.push_back(m.path);
  }
  for (const auto& [link, to] : spec_.symlinks) {
    if (link.empty() || link[0] != '/' || made.count(link)) continue;
    made.insert(link);
    steps_.push_back({Step::kSymlink, dir_ + link, to, 0});
  }
  for (const auto& d : dev_dirs) steps_.push_back({Step::kSeal, dir_ + d, "", 0});
  return okStatus();
}

Result<std::unique_ptr<Jail>> Jail::create(const JailerConfig& cfg, JailSpec spec) {
  const std::string ctx = "jail " + spec.id;
  if (!cfg.uids) return Error(Code::kInvalidArgument, ctx + ": no uid range");
  std::unique_ptr<Jail> j(new Jail(cfg));
  j->spec_ = std::move(spec);
  const std::string name = cfg.name_prefix + j->spec_.id;
  VESSEL_ASSIGN_OR_RETURN(j->uid_, cfg.uids->allocate(name));
  j->leased_ = true;
  // From here on ~Jail undoes whatever was done.
  j->dir_ = cfg.jail_root + "/" + name;
  std::error_code ec;
  fs::create_directories(cfg.jail_root, ec);
  if (::mkdir(j->dir_.c_str(), 0700) != 0) {
    j->dir_.clear();
    return Error::fromErrno(ctx + ": mkdir jail dir");
  }
  auto cg = Cgroup::create(cfg.cgroups, name, j->spec_.limits);
  if (!cg.ok()) return std::move(cg).error().withContext(ctx);
  j->cgroup_ = std::move(*cg);
  j->procs_ = j->cgroup_.procsFiles();
  VESSEL_TRY(j->plan());
  for (const auto& p : j->spec_.owned) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return Error::fromErrno(ctx + ": " + p);
    // Lent as the VM's alone; given back as it was (a template build's
    // files become templates every VM reads).
    j->lent_.push_back({p, st.st_uid, st.st_gid, st.st_mode & 07777});
    if (::fchownat(AT_FDCWD, p.c_str(), j->uid_, j->uid_, AT_SYMLINK_NOFOLLOW) != 0)
      return Error::fromErrno(ctx + ": chown " + p);
    ::chmod(p.c_str(), S_ISDIR(st.st_mode) ? 0700 : 0600);
  }
  return j;
}

Result<std::unique_ptr<Jail>> Jail::adopt(const JailerConfig& cfg, JailSpec spec, pid_t pid) {
  const std::string ctx = "adopt jail " + spec.id;
  if (!cfg.uids) return Error(Code::kInvalidArgument, ctx + ": no uid range");
  VESSEL_ASSIGN_OR_RETURN(uint32_t uid, processUid(pid));
  if (!cfg.uids->contains(uid))
    return Error(Code::kFailedPrecondition,
                 ctx + ": process runs as uid " + std::to_string(uid) + ", not a VM uid");
  std::unique_ptr<Jail> j(new Jail(cfg));
  j->spec_ = std::move(spec);
  const std::string name = cfg.name_prefix + j->spec_.id;
  VESSEL_TRY_CTX(cfg.uids->claim(uid, name), ctx);
  j->uid_ = uid;
  j->leased_ = true;
  j->dir_ = cfg.jail_root + "/" + name;
  auto cg = Cgroup::adopt(cfg.cgroups, name);
  if (cg.ok()) j->cgroup_ = std::move(*cg);
  // What they were before the earlier vesseld lent them is not known:
  // vesseld's own, readable as files it makes are.
  for (const auto& p : j->spec_.owned) j->lent_.push_back({p, 0, 0, 0644});
  return j;
}

void Jail::release() {
  released_ = true;
  cgroup_.release();
}

Jail::~Jail() {
  if (released_) return;
  Logger log("jail", spec_.id);
  if (auto s = cgroup_.remove(); !s.ok()) log.warn("{}", s.error().message());
  for (const auto& l : lent_) {
    struct stat st {};
    // The socket directory is removed with the run dir.
    if (::lstat(l.path.c_str(), &st) != 0 || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)) continue;
    (void)::fchownat(AT_FDCWD, l.path.c_str(), l.uid, l.gid, AT_SYMLINK_NOFOLLOW);
    ::chmod(l.path.c_str(), l.mode);
  }
  if (!dir_.empty() && ::rmdir(dir_.c_str()) != 0 && errno != ENOENT)
    log.warn("rmdir {}: {}", dir_, strerror(errno));
  if (leased_) cfg_.uids->free(uid_);
}

Result<ChildProcess> Jail::spawn(SpawnOptions opts) const {
  const std::string ctx = "jail " + spec_.id + ": spawn " + (opts.argv.empty() ? "" : opts.argv[0]);
  // The child enters the jail, then runs the caller's own step.
  std::function<int()> after = std::move(opts.pre_exec);
  opts.pre_exec = [this, after = std::move(after)]() -> int {
    if (int e = enter(); e != 0) return e;
    return after ? after() : 0;
  };
  // A PID namespace is entered by a process's children, not by itself:
  // this thread's next child becomes PID 1 of a new one, and the thread's
  // own children go back to its old one right after the fork. Namespaces
  // are per thread, so vesseld's other threads never see the new one.
  if (!cfg_.own_namespaces) {
    auto child = ChildProcess::spawn(opts);
    if (!child.ok()) return std::move(child).error().withContext("jail " + spec_.id);
    return child;
  }
  VESSEL_ASSIGN_OR_RETURN(Fd own, Fd::open("/proc/thread-self/ns/pid_for_children", O_RDONLY));
  if (::unshare(CLONE_NEWPID) != 0) return Error::fromErrno(ctx + ": unshare pid namespace");
  auto child = ChildProcess::spawn(opts);
  // Failing, every later child of this thread would land in that
  // namespace (and fail once its init is gone): a broken invariant.
  VESSEL_CHECK(::setns(own.get(), CLONE_NEWPID) == 0);
  if (!child.ok()) return std::move(child).error().withContext("jail " + spec_.id);
  return child;
}

// Runs in the forked child: raw system calls only, on data planned above.
// One function over 80 lines because its steps must run in this order in
// one process (cgroup while /sys is in view, namespaces, mounts, pivot,
// then the ids last while root still may), and each is a few calls.
int Jail::enter() const noexcept {
  // 1. Join the cgroup while the host's /sys is still in view.
  char pid[16];
  int n = 0;
  for (pid_t v = ::getpid(); v > 0; v /= 10) pid[n++] = static_cast<char>('0' + v % 10);
  for (int i = 0; i < n / 2; ++i) std::swap(pid[i], pid[n - 1 - i]);
  for (const auto& p : procs_) {
    int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    ssize_t w = ::write(fd, pid, static_cast<size_t>(n));
    int e = errno;
    ::close(fd);
    if (w != n) return e ? e : EIO;
  }
  // 2. A mount namespace of its own whose changes never reach the host;
  // a network namespace with nothing in it but a loopback that is down
  // (no route to the host's loopback APIs, other nodes, the metadata
  // address or the internet: its tap arrives as an fd, and every socket
  // vesseld shares with it is path-named, which works across network
  // namespaces); IPC (no SysV objects or POSIX queues of the host) and UTS
  // (no host name) of its own.
  int ns =
      cfg_.own_namespaces ? CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS : CLONE_NEWNS;
  if (::unshare(ns) != 0) return errno;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  if (::mount("vessel-jail", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=1m,nr_inodes=4096,mode=0755") != 0)
    return errno;
  for (const auto& s : steps_) {
    switch (s.kind) {
      case Step::kMkdir:
        if (::mkdir(s.target.c_str(), 0755) != 0 && errno != EEXIST) return errno;
        break;
      case Step::kTouch: {
        int fd = ::open(s.target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) return errno;
        ::close(fd);
        break;
      }
      case Step::kBind:
        if (::mount(s.source.c_str(), s.target.c_str(), nullptr, MS_BIND, nullptr) != 0)
          return errno;
        if (::mount(nullptr, s.target.c_str(), nullptr, s.remount_flags, nullptr) != 0)
          return errno;
        break;
      case Step::kSymlink:
        if (::symlink(s.source.c_str(), s.target.c_str()) != 0) return errno;
        break;
      case Step::kDevTmpfs:
        if (::mount("vessel-dev", s.target.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC,
                    "size=64k,nr_inodes=64,mode=0755") != 0)
          return errno;
        break;
      case Step::kMknod:
        if (::mknod(s.target.c_str(), s.mode | 0600, s.rdev) != 0) return errno;
        if (::chown(s.target.c_str(), uid_, uid_) != 0) return errno;
        break;
      case Step::kSeal:
        // Nothing more can be made there, even by a process that had the
        // capability to make device nodes.
        if (::mount(nullptr, s.target.c_str(), nullptr,
                    MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, nullptr) != 0)
          return errno;
        break;
    }
  }
  // 3. pivot_root (not chroot): the host's root is unmounted from this
  // namespace, so there is no way back to it.
  if (::chdir(dir_.c_str()) != 0) return errno;
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return errno;
  if (::umount2(".", MNT_DETACH) != 0) return errno;
  if (::chdir("/") != 0) return errno;
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0)
    return errno;
  // 4. No core dumps of guest memory on the host.
  struct rlimit no_core {};
  ::setrlimit(RLIMIT_CORE, &no_core);
  // 5. No capabilities, now or after exec, and no way to gain any.
  for (int cap = 0; cap <= 63; ++cap)
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return errno;
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  // Raw system calls: glibc's wrappers would signal threads that do not
  // exist in this child.
  if (::syscall(SYS_setgroups, 0, nullptr) != 0) return errno;
  if (::syscall(SYS_setresgid, uid_, uid_, uid_) != 0) return errno;
  if (::syscall(SYS_setresuid, uid_, uid_, uid_) != 0) return errno;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  return 0;
}

}  // namespace vessel::os
