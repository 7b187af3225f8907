#include "agent/volumes.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

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

}  // namespace

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
  if (Status st = mkdirP(m->path, 0755); !st.ok())
    return ch_.sendError(stream, std::move(st).error().withContext("mount volume"));
  int fd = openFuseDevice();
  if (fd < 0)
    return ch_.sendError(stream,
                         Error::fromErrno("mount volume at " + m->path + ": open /dev/fuse"));
  bool ro = m->flags & agentproto::MountVolumeMsg::kReadOnly;
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
      ch_.grant(stream, agentproto::frameCost(f.payload.size()));
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
  if (it->second.fd >= 0) ::close(it->second.fd);
  (void)::umount2(it->second.path.c_str(), MNT_DETACH);
  mounts_.erase(it);
  if (e)
    ch_.sendError(stream, *e);
  else
    ch_.sendOk(stream);
}

void Volumes::poll(PollSet& ps) {
  for (auto& [stream, m] : mounts_) {
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
  for (auto& [stream, m] : mounts_) {
    if (m.fd >= 0) ::close(m.fd);
    (void)::umount2(m.path.c_str(), MNT_DETACH);
  }
  mounts_.clear();
}

}  // namespace vessel::agent
