#include "agent/volumes.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "agent/files.h"

namespace vessel::agent {

using agentproto::Frame;
using agentproto::MsgType;

namespace {

// /dev/fuse: a devtmpfs makes it when the kernel has FUSE; an agent on a
// /dev without it makes the node (misc device 10, 229).
int openFuseDevice() {
  int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0 || errno != ENOENT) return fd;
  if (::mknod("/dev/fuse", S_IFCHR | 0666, makedev(10, 229)) != 0 && errno != EEXIST) return -1;
  return ::open("/dev/fuse", O_RDWR | O_CLOEXEC | O_NONBLOCK);
}

// Whether `path` is absolute and plain: no empty, "." or ".." component, so
// that what is mounted and later unmounted is the directory the host named.
bool plainAbsolute(const std::string& path) {
  if (path.size() < 2 || path[0] != '/' || path.back() == '/') return false;
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string::npos) slash = path.size();
    std::string_view c(path.data() + pos, slash - pos);
    if (c.empty() || c == "." || c == "..") return false;
    pos = slash + 1;
  }
  return true;
}

int64_t monotonicMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// The FUSE opcodes the kernel expects no answer to (linux/fuse.h), and a
// lock wait (SETLKW, blocking flock), which the server answers when the
// lock is free, however long that is: it is not waited for before a save.
// Its answer reaches the guest whenever it comes: after a resume through
// the same held server, or never in a fork's copy, whose mount is anew.
constexpr uint32_t kFuseForget = 2, kFuseSetlkw = 33, kFuseInterrupt = 36, kFuseBatchForget = 42;
// Bounds the outstanding set whatever the kernel queues (the host's credit
// bounds it far lower).
constexpr size_t kMaxOutstanding = 1 << 16;

uint64_t le64(const char* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, sizeof v);  // the guest and FUSE are little-endian
  return v;
}

void unmountLazily(int fd, const std::string& path) {
  if (fd >= 0) ::close(fd);
  (void)::umount2(path.c_str(), MNT_DETACH);
}

}  // namespace

bool Volumes::takeBack(uint32_t stream, const std::string& path, bool read_only, bool keep) {
  auto it = detached_.find(path);
  if (it == detached_.end()) return false;
  Mount m = std::move(it->second);
  detached_.erase(it);
  if (!keep || m.read_only != read_only || !m.outstanding.empty()) {
    // Its session cannot continue: callers waiting on it fail now, and
    // the path is free for the new mount.
    unmountLazily(m.fd, m.path);
    return false;
  }
  m.quiet = false;
  m.detached_at_ms = 0;
  mounts_.emplace(stream, std::move(m));
  ch_.send(MsgType::kVolumeKept, stream, {});
  return true;
}

void Volumes::quiesce(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::QuiesceVolumesMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  bool release = m->flags & agentproto::QuiesceVolumesMsg::kRelease;
  for (auto& [s, mt] : mounts_) mt.quiet = !release;
  if (release) return ch_.sendOk(stream);
  quiesce_waiters_.push_back(stream);
  answerQuiesced();
}

void Volumes::answerQuiesced() {
  if (quiesce_waiters_.empty()) return;
  for (const auto& [s, mt] : mounts_)
    if (!mt.outstanding.empty()) return;
  for (uint32_t w : quiesce_waiters_) ch_.sendOk(w);
  quiesce_waiters_.clear();
}

void Volumes::detachAll() {
  int64_t now = monotonicMs();
  for (auto& [stream, m] : mounts_) {
    m.detached_at_ms = now;
    // Two hosts' worth of the same path cannot be: the older one ends.
    if (auto old = detached_.find(m.path); old != detached_.end()) {
      unmountLazily(old->second.fd, old->second.path);
      detached_.erase(old);
    }
    detached_.emplace(m.path, std::move(m));
  }
  mounts_.clear();
  quiesce_waiters_.clear();
}

void Volumes::request(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::MountVolumeMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  if (!plainAbsolute(m->path))
    return ch_.sendError(
        stream, Error(Code::kInvalidArgument, "volume mount path '" + m->path +
                                                  "' is not an absolute path without . or .."));
  if (mounts_.size() >= kMaxVolumeMounts)
    return ch_.sendError(
        stream, Error(Code::kResourceExhausted,
                      "more than " + std::to_string(kMaxVolumeMounts) + " volumes mounted"));
  for (const auto& [s, other] : mounts_)
    if (other.path == m->path)
      return ch_.sendError(stream,
                           Error(Code::kAlreadyExists, "a volume is mounted at " + m->path));
  bool ro = m->flags & agentproto::MountVolumeMsg::kReadOnly;
  bool keep = m->flags & agentproto::MountVolumeMsg::kKeepSession;
  if (takeBack(stream, m->path, ro, keep)) return;
  if (Status st = mkdirP(m->path, 0755); !st.ok())
    return ch_.sendError(stream, std::move(st).error().withContext("mount volume"));
  int fd = openFuseDevice();
  if (fd < 0)
    return ch_.sendError(stream,
                         Error::fromErrno("mount volume at " + m->path + ": open /dev/fuse"));
  std::string data = "fd=" + std::to_string(fd) +
                     ",rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other,"
                     "max_read=" +
                     std::to_string(agentproto::kMaxVolumeIo);
  unsigned long flags = MS_NOSUID | MS_NODEV | (ro ? MS_RDONLY : 0);
  if (::mount("vessel-volume", m->path.c_str(), "fuse", flags, data.c_str()) != 0) {
    Error e = Error::fromErrno("mount volume at " + m->path);
    ::close(fd);
    return ch_.sendError(stream, e);
  }
  Mount mt;
  mt.fd = fd;
  mt.path = m->path;
  mt.read_only = ro;
  mounts_.emplace(stream, std::move(mt));
}

void Volumes::onReadable(uint32_t stream, Mount& m) {
  // One read is one whole FUSE request (the kernel needs room for the
  // largest, a write of max_write bytes plus its headers).
  auto buf = std::make_unique<char[]>(agentproto::kMaxVolumeMessage);
  ssize_t n = ::read(m.fd, buf.get(), agentproto::kMaxVolumeMessage);
  if (n < 0 && (errno == EAGAIN || errno == EINTR || errno == ENOENT)) return;
  if (n < 0 && errno == ENODEV) return end(stream, nullptr);  // unmounted in the guest
  if (n < 0) {
    Error e = Error::fromErrno("volume at " + m.path + ": read /dev/fuse");
    return end(stream, &e);
  }
  if (n < 16) return;  // never from a kernel; nothing to relay
  uint32_t opcode = 0;
  std::memcpy(&opcode, buf.get() + 4, sizeof opcode);
  if (opcode != kFuseForget && opcode != kFuseBatchForget && opcode != kFuseInterrupt &&
      opcode != kFuseSetlkw && m.outstanding.size() < kMaxOutstanding)
    m.outstanding.insert(le64(buf.get() + 8));
  ch_.send(MsgType::kVolumeData, stream, std::string_view(buf.get(), static_cast<size_t>(n)));
}

bool Volumes::onStreamFrame(uint32_t stream, const Frame& f) {
  auto it = mounts_.find(stream);
  if (it == mounts_.end()) return false;
  switch (f.type) {
    case MsgType::kCredit: {
      auto m = agentproto::decodeMsg<agentproto::CreditMsg>(f.payload);
      if (m.ok()) ch_.addCredit(stream, m->bytes);
      break;
    }
    case MsgType::kCancel: end(stream, nullptr); break;
    case MsgType::kVolumeData: {
      // The server's answer, whole. An answer to a request the kernel
      // no longer waits for (interrupted: ENOENT) is dropped, as a
      // malformed one is (EINVAL: the kernel refuses it, the request
      // stays unanswered, which only hangs calls on this mount).
      ssize_t n;
      do n = ::write(it->second.fd, f.payload.data(), f.payload.size());
      while (n < 0 && errno == EINTR);
      if (n < 0 && errno == ENODEV) {
        end(stream, nullptr);
        break;
      }
      // Answered (or no longer awaited): the out header's unique, as the
      // request's (a shorter payload the kernel refused above).
      if (f.payload.size() >= 16) it->second.outstanding.erase(le64(f.payload.data() + 8));
      ch_.grant(stream, agentproto::frameCost(f.payload.size()));
      answerQuiesced();
      break;
    }
    default: break;
  }
  return true;
}

void Volumes::end(uint32_t stream, const Error* e) {
  auto it = mounts_.find(stream);
  if (it == mounts_.end()) return;
  // Closing the device aborts the session (calls fail with ENOTCONN); the
  // lazy unmount then takes it off the path once nothing uses it.
  unmountLazily(it->second.fd, it->second.path);
  mounts_.erase(it);
  answerQuiesced();  // one fewer to wait for
  if (e)
    ch_.sendError(stream, *e);
  else
    ch_.sendOk(stream);
}

void Volumes::poll(PollSet& ps) {
  if (!detached_.empty()) {
    // Unclaimed past the grace: the host is not coming back for them.
    int64_t now = monotonicMs();
    for (auto it = detached_.begin(); it != detached_.end();) {
      int64_t left = it->second.detached_at_ms + agentproto::kDetachedVolumeGraceMs - now;
      if (left > 0) {
        ps.wakeWithin(static_cast<int>(std::min<int64_t>(left, 1000)));
        ++it;
        continue;
      }
      unmountLazily(it->second.fd, it->second.path);
      it = detached_.erase(it);
    }
  }
  for (auto& [stream, m] : mounts_) {
    if (m.quiet) continue;  // its requests wait in the kernel
    // Read only what the host has credit for: a busy guest is slowed,
    // its requests wait in the kernel's queue.
    if (!ch_.canSend(stream, agentproto::kMaxVolumeMessage)) continue;
    ps.add(m.fd, POLLIN, [this, s = stream](short rev) {
      auto it = mounts_.find(s);
      if (it == mounts_.end()) return;
      if (rev & (POLLERR | POLLHUP)) {
        // The connection was aborted (the mount is gone).
        if (!(rev & POLLIN)) return end(s, nullptr);
      }
      if (ch_.canSend(s, agentproto::kMaxVolumeMessage)) onReadable(s, it->second);
    });
  }
}

void Volumes::abortAll() {
  for (auto& [stream, m] : mounts_) unmountLazily(m.fd, m.path);
  mounts_.clear();
  for (auto& [path, m] : detached_) unmountLazily(m.fd, m.path);
  detached_.clear();
  quiesce_waiters_.clear();
}

}  // namespace vessel::agent
