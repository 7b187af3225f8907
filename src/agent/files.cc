#include "agent/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>

namespace vessel::agent {

using agentproto::FileStat;
using agentproto::Frame;
using agentproto::MsgType;

namespace {

// Paths arrive as length-prefixed strings: an embedded NUL would make the
// C string the kernel sees differ from the one that was checked.
Status checkPath(const std::string& p) {
  if (p.empty() || p[0] != '/' || p.find('\0') != std::string::npos)
    return Error(Code::kInvalidArgument, "path must be absolute: " + p.substr(0, 256));
  return okStatus();
}

FileStat toStat(const struct stat& st, const std::string& path) {
  FileStat s;
  if (S_ISREG(st.st_mode))
    s.type = static_cast<uint8_t>(agentproto::FileType::kFile);
  else if (S_ISDIR(st.st_mode))
    s.type = static_cast<uint8_t>(agentproto::FileType::kDir);
  else if (S_ISLNK(st.st_mode))
    s.type = static_cast<uint8_t>(agentproto::FileType::kSymlink);
  else
    s.type = static_cast<uint8_t>(agentproto::FileType::kOther);
  s.mode = st.st_mode & 07777;
  s.uid = st.st_uid;
  s.gid = st.st_gid;
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (S_ISLNK(st.st_mode)) {
    char buf[agentproto::kMaxPath];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    if (n > 0) s.link_target.assign(buf, static_cast<size_t>(n));
  }
  return s;
}

}  // namespace

Status mkdirP(const std::string& path, mode_t mode) {
  size_t pos = 1;
  for (;;) {
    size_t slash = path.find('/', pos);
    std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), mode) != 0) {
      struct stat st;
      if (errno != EEXIST) return Error::fromErrno("mkdir " + prefix);
      if (::stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return Error(Code::kAlreadyExists, "mkdir " + prefix + ": exists and is not a directory");
    }
    if (slash == std::string::npos) return okStatus();
    pos = slash + 1;
  }
}

namespace {

Status removeTree(const std::string& path, bool recursive, int level) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Error::fromErrno("remove " + path);
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0) return Error::fromErrno("remove " + path);
    return okStatus();
  }
  if (recursive) {
    if (level > 256) return Error(Code::kInvalidArgument, "remove " + path + ": too deep");
    DIR* d = ::opendir(path.c_str());
    if (!d) return Error::fromErrno("remove " + path);
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        names.emplace_back(e->d_name);
    ::closedir(d);
    for (const auto& n : names) {
      Status s = removeTree(path + "/" + n, true, level + 1);
      if (!s.ok()) return s;
    }
  }
  if (::rmdir(path.c_str()) != 0) return Error::fromErrno("remove " + path);
  return okStatus();
}

// Depth-first walk collecting up to kMaxListEntries entries.
Status walk(const std::string& abs, const std::string& rel, uint32_t level, uint32_t depth,
            std::vector<agentproto::ListEntry>& out) {
  DIR* d = ::opendir(abs.c_str());
  if (!d) return level == 1 ? Error::fromErrno("list " + abs) : okStatus();
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.emplace_back(e->d_name);
  ::closedir(d);
  for (const auto& n : names) {
    if (out.size() >= kMaxListEntries)
      return Error(Code::kResourceExhausted, "list " + abs + ": more than 100000 entries");
    std::string child = abs == "/" ? "/" + n : abs + "/" + n;
    std::string crel = rel.empty() ? n : rel + "/" + n;
    struct stat st;
    if (::lstat(child.c_str(), &st) != 0) continue;  // raced with a removal
    out.push_back({crel, toStat(st, child)});
    if (S_ISDIR(st.st_mode) && level < depth) {
      Status s = walk(child, crel, level + 1, depth, out);
      if (!s.ok()) return s;
    }
  }
  return okStatus();
}

// The names of `path`'s attributes under `prefix`.
Result<std::vector<std::string>> xattrNames(const std::string& path, const std::string& prefix) {
  std::string buf(64 * 1024, '\0');
  ssize_t n = ::llistxattr(path.c_str(), buf.data(), buf.size());
  if (n < 0) return Error::fromErrno("listxattr " + path);
  std::vector<std::string> out;
  for (size_t i = 0; i < static_cast<size_t>(n);) {
    std::string name(buf.data() + i);
    i += name.size() + 1;
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0)
      out.push_back(std::move(name));
  }
  return out;
}

Result<std::vector<agentproto::Xattr>> getXattrs(const std::string& path,
                                                 const std::string& prefix) {
  VESSEL_ASSIGN_OR_RETURN(auto names, xattrNames(path, prefix));
  std::vector<agentproto::Xattr> out;
  for (const auto& n : names) {
    if (out.size() >= agentproto::kMaxXattrs) break;
    std::string v(4096, '\0');
    ssize_t len = ::lgetxattr(path.c_str(), n.c_str(), v.data(), v.size());
    if (len < 0) continue;  // removed meanwhile, or too large for the protocol
    v.resize(static_cast<size_t>(len));
    std::string short_name = n.substr(prefix.size());
    if (short_name.size() > 255) continue;
    out.push_back({std::move(short_name), std::move(v)});
  }
  return out;
}

Status setXattrs(const agentproto::SetXattrsMsg& m) {
  if (m.prefix.empty()) return Error(Code::kInvalidArgument, "setxattrs: empty prefix");
  VESSEL_ASSIGN_OR_RETURN(auto names, xattrNames(m.path, m.prefix));
  for (const auto& n : names)
    if (::lremovexattr(m.path.c_str(), n.c_str()) != 0 && errno != ENODATA)
      return Error::fromErrno("removexattr " + m.path);
  for (const auto& a : m.attrs) {
    std::string name = m.prefix + a.name;
    if (::lsetxattr(m.path.c_str(), name.c_str(), a.value.data(), a.value.size(), 0) != 0)
      return Error::fromErrno("setxattr " + m.path + " " + name);
  }
  return okStatus();
}

}  // namespace

void Files::request(uint32_t stream, const Frame& f) {
  switch (f.type) {
    case MsgType::kReadFile: return startRead(stream, f);
    case MsgType::kWriteFile: return startWrite(stream, f);
    case MsgType::kList: return startList(stream, f);
    case MsgType::kWatch: return startWatch(stream, f);
    case MsgType::kWriteFileInPlace: return startWriteInPlace(stream, f);
    case MsgType::kWatchTree: return startWatchTree(stream, f);
    default: return simple(stream, f);
  }
}

void Files::simple(uint32_t stream, const Frame& f) {
  Status s = okStatus();
  switch (f.type) {
    case MsgType::kStat: {
      auto m = agentproto::decodeMsg<agentproto::StatMsg>(f.payload);
      if (!m.ok()) return ch_.sendError(stream, m.error());
      if (Status c = checkPath(m->path); !c.ok()) return ch_.sendError(stream, c.error());
      struct stat st;
      if (::lstat(m->path.c_str(), &st) != 0)
        return ch_.sendError(stream, Error::fromErrno("stat " + m->path));
      ch_.sendMsg(stream, agentproto::StatResultMsg{toStat(st, m->path)});
      return ch_.sendOk(stream);
    }
    case MsgType::kSetXattrs: {
      auto m = agentproto::decodeMsg<agentproto::SetXattrsMsg>(f.payload);
      if (!m.ok()) return ch_.sendError(stream, m.error());
      s = checkPath(m->path);
      if (s.ok()) s = setXattrs(*m);
      break;
    }
    case MsgType::kGetXattrs: {
      auto m = agentproto::decodeMsg<agentproto::GetXattrsMsg>(f.payload);
      if (!m.ok()) return ch_.sendError(stream, m.error());
      if (Status c = checkPath(m->path); !c.ok()) return ch_.sendError(stream, c.error());
      auto attrs = getXattrs(m->path, m->prefix);
      if (!attrs.ok()) return ch_.sendError(stream, attrs.error());
      ch_.sendMsg(stream, agentproto::XattrsResultMsg{std::move(*attrs)});
      return ch_.sendOk(stream);
    }
    case MsgType::kMkdir: {
      auto m = agentproto::decodeMsg<agentproto::MkdirMsg>(f.payload);
      if (!m.ok()) return ch_.sendError(stream, m.error());
      s = checkPath(m->path);
      if (s.ok() && m->parents)
        s = mkdirP(m->path, m->mode & 07777);
      else if (s.ok() && ::mkdir(m->path.c_str(), m->mode & 07777) != 0)
        s = Error::fromErrno("mkdir " + m->path);
      break;
    }
    case MsgType::kRemove: {
      auto m = agentproto::decodeMsg<agentproto::RemoveMsg>(f.payload);
      if (!m.ok()) return ch_.sendError(stream, m.error());
      s = checkPath(m->path);
      if (s.ok() && m->path == "/") s = Error(Code::kInvalidArgument, "refusing to remove /");
      if (s.ok()) s = removeTree(m->path, m->recursive, 0);
      break;
    }
    case MsgType::kRename: {
      auto m = agentproto::decodeMsg<agentproto::RenameMsg>(f.payload);
      if (!m.ok()) return ch_.sendError(stream, m.error());
      s = checkPath(m->from);
      if (s.ok()) s = checkPath(m->to);
      if (s.ok() && ::rename(m->from.c_str(), m->to.c_str()) != 0)
        s = Error::fromErrno("rename " + m->from + " to " + m->to);
      break;
    }
    default: s = Error(Code::kInvalidArgument, "not a file request");
  }
  if (!s.ok()) return ch_.sendError(stream, s.error());
  ch_.sendOk(stream);
}

void Files::startRead(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::ReadFileMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  if (Status c = checkPath(m->path); !c.ok()) return ch_.sendError(stream, c.error());
  int fd = ::open(m->path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return ch_.sendError(stream, Error::fromErrno("open " + m->path));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return ch_.sendError(stream,
                         Error(Code::kInvalidArgument, "read " + m->path + ": not a regular file"));
  }
  if (m->offset && ::lseek(fd, static_cast<off_t>(m->offset), SEEK_SET) < 0) {
    Error e = Error::fromErrno("seek " + m->path);
    ::close(fd);
    return ch_.sendError(stream, e);
  }
  Op op{Kind::kRead};
  op.fd = fd;
  op.path = m->path;
  ops_[stream] = std::move(op);
}

void Files::startWrite(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::WriteFileMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  if (Status c = checkPath(m->path); !c.ok()) return ch_.sendError(stream, c.error());
  size_t slash = m->path.rfind('/');
  std::string dir = slash == 0 ? "/" : m->path.substr(0, slash);
  std::string base = m->path.substr(slash + 1);
  if (base.empty())
    return ch_.sendError(stream, Error(Code::kInvalidArgument, "write " + m->path + ": no name"));
  // The temporary file sits beside the target so rename(2) is atomic.
  std::string tmp = (dir == "/" ? "" : dir) + "/." + base.substr(0, 200) + ".vessel-XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return ch_.sendError(stream, Error::fromErrno("create temporary file in " + dir));
  Op op{Kind::kWrite};
  op.fd = fd;
  op.path = m->path;
  op.tmp = tmp;
  op.write = *m;
  ops_[stream] = std::move(op);
}

void Files::startWriteInPlace(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::WriteFileInPlaceMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  if (Status c = checkPath(m->path); !c.ok()) return ch_.sendError(stream, c.error());
  Op op{Kind::kWrite};
  op.in_place = true;
  // O_EXCL first, to know whether the mode and owner are ours to set.
  int fd = ::open(m->path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                  m->mode & 07777);
  if (fd >= 0) {
    op.created = true;
  } else if (errno == EEXIST) {
    fd = ::open(m->path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
  }
  if (fd < 0) return ch_.sendError(stream, Error::fromErrno("write " + m->path));
  op.fd = fd;
  op.path = m->path;
  op.write = agentproto::WriteFileMsg{m->path, m->mode, m->uid, m->gid};
  ops_[stream] = std::move(op);
}

void Files::finishWrite(uint32_t stream, Op& op) {
  Status s = okStatus();
  const auto& w = op.write;
  if (op.in_place) {
    // An existing file keeps its mode and owner, as when a program writes it.
    if (op.created && ::fchmod(op.fd, w.mode & 07777) != 0)
      s = Error::fromErrno("chmod " + op.path);
    if (s.ok() && op.created && (w.uid != agentproto::kNoOwner || w.gid != agentproto::kNoOwner) &&
        ::fchown(op.fd, w.uid == agentproto::kNoOwner ? static_cast<uid_t>(-1) : w.uid,
                 w.gid == agentproto::kNoOwner ? static_cast<gid_t>(-1) : w.gid) != 0)
      s = Error::fromErrno("chown " + op.path);
    if (s.ok() && ::fsync(op.fd) != 0) s = Error::fromErrno("fsync " + op.path);
    return end(stream, s.ok() ? nullptr : &s.error());
  }
  if (::fchmod(op.fd, w.mode & 07777) != 0) s = Error::fromErrno("chmod " + op.path);
  if (s.ok() && (w.uid != agentproto::kNoOwner || w.gid != agentproto::kNoOwner) &&
      ::fchown(op.fd, w.uid == agentproto::kNoOwner ? static_cast<uid_t>(-1) : w.uid,
               w.gid == agentproto::kNoOwner ? static_cast<gid_t>(-1) : w.gid) != 0)
    s = Error::fromErrno("chown " + op.path);
  if (s.ok() && ::fsync(op.fd) != 0) s = Error::fromErrno("fsync " + op.path);
  if (s.ok() && ::rename(op.tmp.c_str(), op.path.c_str()) != 0)
    s = Error::fromErrno("rename into " + op.path);
  if (s.ok()) op.tmp.clear();  // nothing to clean up any more
  end(stream, s.ok() ? nullptr : &s.error());
}

void Files::startList(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::ListMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  if (Status c = checkPath(m->path); !c.ok()) return ch_.sendError(stream, c.error());
  if (m->depth < 1 || m->depth > agentproto::kMaxListDepth)
    return ch_.sendError(stream, Error(Code::kInvalidArgument, "list depth must be 1..32"));
  struct stat st;
  if (::stat(m->path.c_str(), &st) != 0)
    return ch_.sendError(stream, Error::fromErrno("list " + m->path));
  if (!S_ISDIR(st.st_mode))
    return ch_.sendError(stream, Error::fromErrno("list " + m->path, ENOTDIR));
  Op op{Kind::kList};
  Status s = walk(m->path, "", 1, m->depth, op.entries);
  if (!s.ok()) return ch_.sendError(stream, s.error());
  ops_[stream] = std::move(op);
}

void Files::startWatch(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::WatchMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  if (Status c = checkPath(m->path); !c.ok()) return ch_.sendError(stream, c.error());
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return ch_.sendError(stream, Error::fromErrno("inotify_init"));
  if (::inotify_add_watch(fd, m->path.c_str(),
                          IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                              IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF) < 0) {
    Error e = Error::fromErrno("watch " + m->path);
    ::close(fd);
    return ch_.sendError(stream, e);
  }
  Op op{Kind::kWatch};
  op.fd = fd;
  ops_[stream] = std::move(op);
  // An event of kind 0 says the watch is in place: changes after it are seen.
  ch_.sendMsg(stream, agentproto::WatchEventMsg{0, ""});
}

namespace {
constexpr uint32_t kWatchMask = IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;

// Watches `abs` (relative name `rel`) and every directory below it, up to
// the cap; directories that vanish meanwhile are skipped.
Status watchTree(int fd, const std::string& abs, const std::string& rel,
                 std::map<int, std::string>& dirs) {
  if (dirs.size() >= agentproto::kMaxWatchDirs)
    return Error(Code::kResourceExhausted, "watch: more than 8192 directories");
  int wd = ::inotify_add_watch(fd, abs.c_str(), kWatchMask | IN_ONLYDIR | IN_DONT_FOLLOW);
  if (wd < 0) {
    if (rel.empty()) return Error::fromErrno("watch " + abs);
    return okStatus();
  }
  dirs[wd] = rel;
  DIR* d = ::opendir(abs.c_str());
  if (!d) return okStatus();
  std::vector<std::string> subdirs;
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (e->d_type == DT_DIR) subdirs.push_back(n);
  }
  ::closedir(d);
  for (const auto& n : subdirs) {
    Status s =
        watchTree(fd, abs == "/" ? "/" + n : abs + "/" + n, rel.empty() ? n : rel + "/" + n, dirs);
    if (!s.ok()) return s;
  }
  return okStatus();
}
}  // namespace

void Files::startWatchTree(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::WatchTreeMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  if (Status c = checkPath(m->path); !c.ok()) return ch_.sendError(stream, c.error());
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return ch_.sendError(stream, Error::fromErrno("inotify_init"));
  Op op{Kind::kWatch};
  op.tree = true;
  op.root = m->path;
  if (Status s = watchTree(fd, m->path, "", op.dirs); !s.ok()) {
    ::close(fd);
    return ch_.sendError(stream, s.error());
  }
  op.fd = fd;
  ops_[stream] = std::move(op);
  ch_.sendMsg(stream, agentproto::WatchEventMsg{0, ""});
}

void Files::end(uint32_t stream, const Error* e) {
  auto it = ops_.find(stream);
  if (it == ops_.end()) return;
  Op& op = it->second;
  if (op.fd >= 0) ::close(op.fd);
  if (!op.tmp.empty()) ::unlink(op.tmp.c_str());
  ops_.erase(it);
  if (e)
    ch_.sendError(stream, *e);
  else
    ch_.sendOk(stream);
}

bool Files::onStreamFrame(uint32_t stream, const Frame& f) {
  auto it = ops_.find(stream);
  if (it == ops_.end()) return false;
  Op& op = it->second;
  switch (f.type) {
    case MsgType::kCredit: {
      auto c = agentproto::decodeMsg<agentproto::CreditMsg>(f.payload);
      if (c.ok()) ch_.addCredit(stream, c->bytes);
      break;
    }
    case MsgType::kCancel: end(stream, nullptr); break;
    case MsgType::kFileData: {
      if (op.kind != Kind::kWrite) break;
      size_t off = 0;
      while (off < f.payload.size()) {
        ssize_t n = ::write(op.fd, f.payload.data() + off, f.payload.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          Error e = Error::fromErrno("write " + op.path);
          end(stream, &e);
          return true;
        }
        off += static_cast<size_t>(n);
      }
      ch_.grant(stream, agentproto::frameCost(f.payload.size()));
      break;
    }
    case MsgType::kFileEnd:
      if (op.kind == Kind::kWrite) finishWrite(stream, op);
      break;
    default: break;
  }
  return true;
}

void Files::readWatch(uint32_t stream, Op& op) {
  alignas(inotify_event) char buf[4096];
  ssize_t n = ::read(op.fd, buf, sizeof buf);
  if (n <= 0) return;
  for (ssize_t off = 0; off + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
    // SAFETY: the kernel returns whole, aligned inotify_event records.
    auto* ev = reinterpret_cast<inotify_event*>(buf + off);
    off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    agentproto::WatchEventMsg m;
    using W = agentproto::WatchEventMsg;
    if (ev->mask & IN_CREATE) m.kind |= W::kCreate;
    if (ev->mask & IN_MODIFY) m.kind |= W::kModify;
    if (ev->mask & (IN_DELETE | IN_DELETE_SELF)) m.kind |= W::kDelete;
    if (ev->mask & (IN_MOVED_FROM | IN_MOVE_SELF)) m.kind |= W::kMovedFrom;
    if (ev->mask & IN_MOVED_TO) m.kind |= W::kMovedTo;
    if (ev->mask & IN_ATTRIB) m.kind |= W::kAttrib;
    if (ev->mask & IN_Q_OVERFLOW) m.kind |= W::kOverflow;
    if (ev->len) m.name = std::string(ev->name, strnlen(ev->name, ev->len)).substr(0, 255);
    if (op.tree) {
      auto dir = op.dirs.find(ev->wd);
      if (dir == op.dirs.end()) continue;
      if (ev->mask & IN_IGNORED) {
        op.dirs.erase(dir);
        continue;
      }
      // The root's own removal is reported once, not per directory below.
      if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) && !dir->second.empty()) continue;
      std::string rel = dir->second.empty() ? m.name
                        : m.name.empty()    ? dir->second
                                            : dir->second + "/" + m.name;
      // A directory made (or moved in) below is watched too.
      if ((ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO)) && !m.name.empty()) {
        std::string abs = (op.root == "/" ? "" : op.root) + "/" + rel;
        (void)watchTree(op.fd, abs, rel, op.dirs);
      }
      m.name = rel.substr(0, agentproto::kMaxPath);
    }
    if (m.kind) ch_.sendMsg(stream, m);
  }
}

void Files::poll(PollSet& ps) {
  for (auto& [stream, op] : ops_) {
    // One read of watch events costs at most ~10 KiB of credit.
    if (op.kind == Kind::kWatch && ch_.canSend(stream, 16 * 1024)) {
      ps.add(op.fd, POLLIN, [this, s = stream](short) {
        auto it = ops_.find(s);
        if (it != ops_.end()) readWatch(s, it->second);
      });
    }
  }
}

void Files::pump() {
  for (auto it = ops_.begin(); it != ops_.end();) {
    uint32_t stream = it->first;
    Op& op = it->second;
    ++it;  // end() below may erase the current element
    if (op.kind == Kind::kRead) {
      std::string chunk(agentproto::kDataChunk, '\0');
      while (ch_.canSend(stream, chunk.size())) {
        ssize_t n = ::read(op.fd, chunk.data(), chunk.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          Error e = Error::fromErrno("read " + op.path);
          end(stream, &e);
          break;
        }
        if (n == 0) {
          end(stream, nullptr);
          break;
        }
        ch_.send(MsgType::kFileData, stream, std::string_view(chunk.data(), n));
      }
    } else if (op.kind == Kind::kList) {
      while (op.next < op.entries.size()) {
        agentproto::ListEntriesMsg batch;
        size_t bytes = 0;
        size_t i = op.next;
        for (; i < op.entries.size() && batch.entries.size() < 512 && bytes < 128 * 1024; ++i) {
          bytes += op.entries[i].path.size() + op.entries[i].stat.link_target.size() + 40;
          batch.entries.push_back(op.entries[i]);
        }
        auto p = agentproto::encodeMsg(batch);
        if (!p.ok() || !ch_.canSend(stream, p->size())) break;
        ch_.send(MsgType::kListEntries, stream, *p);
        op.next = i;
      }
      if (op.next == op.entries.size() && ch_.canSend(stream, 0)) end(stream, nullptr);
    }
  }
}

void Files::abortAll() {
  for (auto& [stream, op] : ops_) {
    if (op.fd >= 0) ::close(op.fd);
    if (!op.tmp.empty()) ::unlink(op.tmp.c_str());
  }
  ops_.clear();
}

}  // namespace vessel::agent
