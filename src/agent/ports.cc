#include "agent/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace vessel::agent {

using agentproto::Frame;
using agentproto::MsgType;

namespace {

// Credit for written bytes goes back in batches of this much (or when the
// buffer empties), not one Credit frame per write.
constexpr uint32_t kGrantBatch = 64 * 1024;

Error refused(uint16_t port, int e) {
  if (e == ECONNREFUSED)
    return Error(Code::kUnavailable,
                 "connect to port " + std::to_string(port) +
                     ": connection refused (nothing listens on 127.0.0.1 or ::1 in the sandbox)",
                 e);
  return Error::fromErrno("connect to port " + std::to_string(port), e);
}

}  // namespace

void bringLoopbackUp() {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) == 0 && !(ifr.ifr_flags & IFF_UP)) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    (void)::ioctl(fd, SIOCSIFFLAGS, &ifr);
  }
  ::close(fd);
}

bool Ports::connectTo(Conn& c, bool v6) {
  if (c.fd >= 0) ::close(c.fd);
  c.v6 = v6;
  c.fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.fd < 0) return false;
  int r;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(c.port);
    a.sin6_addr = in6addr_loopback;
    r = ::connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(c.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    r = ::connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (r == 0) {
    c.connecting = false;
    return true;
  }
  if (errno == EINPROGRESS) {
    c.connecting = true;
    return true;
  }
  return false;
}

void Ports::request(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::ConnectPortMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  if (m->port == 0) return ch_.sendError(stream, Error(Code::kInvalidArgument, "port 0"));
  if (conns_.size() >= kMaxPortConnections)
    return ch_.sendError(
        stream, Error(Code::kResourceExhausted, "more than " + std::to_string(kMaxPortConnections) +
                                                    " relayed port connections"));
  // A restored snapshot's PID 1 may predate the boot-time call.
  bringLoopbackUp();
  Conn c;
  c.port = m->port;
  // A server bound to IPv4 only refuses on ::1 and one bound to ::1 only
  // refuses on 127.0.0.1: try both before saying nothing listens.
  if (!connectTo(c, false)) {
    int e = errno;
    // ::1 is only a second chance: its failure (no IPv6 in the guest
    // kernel, or refused too) still reports 127.0.0.1's refusal.
    bool v6_ok = e == ECONNREFUSED && connectTo(c, true);
    if (!v6_ok) {
      if (c.fd >= 0) ::close(c.fd);
      return ch_.sendError(stream, refused(c.port, e));
    }
  }
  auto [it, inserted] = conns_.emplace(stream, std::move(c));
  if (!it->second.connecting) onConnectDone(stream, it->second);
}

void Ports::onConnectDone(uint32_t stream, Conn& c) {
  if (c.connecting) {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == ECONNREFUSED && !c.v6) {
      // ::1 is only a second chance (see request()).
      if (connectTo(c, true)) {
        if (c.connecting) return;  // polled again
        err = 0;
      }
    } else if (c.v6 && err != 0) {
      err = ECONNREFUSED;
    }
    if (c.connecting && err != 0) {
      Error e = refused(c.port, err);
      return end(stream, &e);
    }
    c.connecting = false;
  }
  using agentproto::PortConnectedMsg;
  ch_.sendMsg(stream, PortConnectedMsg{c.v6 ? PortConnectedMsg::kIpv6 : PortConnectedMsg::kIpv4});
  // Data (or a close) the host sent before the answer.
  if (!c.to_guest.empty() || c.host_closed) writeOut(stream, c);
}

void Ports::onReadable(uint32_t stream, Conn& c) {
  char buf[agentproto::kDataChunk];
  ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n < 0) {
    Error e = Error::fromErrno("port " + std::to_string(c.port) + ": read");
    return end(stream, &e);
  }
  if (n == 0) {
    c.guest_eof = true;
    ch_.send(MsgType::kPortClose, stream, "");
    return maybeFinish(stream, c);
  }
  ch_.send(MsgType::kPortData, stream, std::string_view(buf, static_cast<size_t>(n)));
}

void Ports::writeOut(uint32_t stream, Conn& c) {
  while (!c.to_guest.empty()) {
    ssize_t n = ::send(c.fd, c.to_guest.data(), c.to_guest.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) {
      Error e = Error::fromErrno("port " + std::to_string(c.port) + ": write");
      return end(stream, &e);
    }
    c.to_guest.erase(0, static_cast<size_t>(n));
    c.owed += static_cast<uint32_t>(n);
  }
  if (c.owed >= kGrantBatch || (c.to_guest.empty() && c.owed > 0)) {
    ch_.grant(stream, c.owed);
    c.owed = 0;
  }
  if (c.to_guest.empty() && c.host_closed && !c.shut_wr) {
    ::shutdown(c.fd, SHUT_WR);
    c.shut_wr = true;
    maybeFinish(stream, c);
  }
}

void Ports::maybeFinish(uint32_t stream, Conn& c) {
  if (c.shut_wr && c.guest_eof) end(stream, nullptr);
}

void Ports::end(uint32_t stream, const Error* e) {
  auto it = conns_.find(stream);
  if (it == conns_.end()) return;
  if (it->second.fd >= 0) ::close(it->second.fd);
  conns_.erase(it);
  if (e)
    ch_.sendError(stream, *e);
  else
    ch_.sendOk(stream);
}

bool Ports::onStreamFrame(uint32_t stream, const Frame& f) {
  auto it = conns_.find(stream);
  if (it == conns_.end()) return false;
  Conn& c = it->second;
  switch (f.type) {
    case MsgType::kCredit: {
      auto m = agentproto::decodeMsg<agentproto::CreditMsg>(f.payload);
      if (m.ok()) ch_.addCredit(stream, m->bytes);
      break;
    }
    case MsgType::kCancel: end(stream, nullptr); break;
    case MsgType::kPortData:
      // The frame's fixed cost is owed at once; its bytes as they are written.
      c.owed += agentproto::kFrameCost;
      if (c.host_closed) {
        c.owed += static_cast<uint32_t>(f.payload.size());
        break;
      }
      c.to_guest += f.payload;
      if (!c.connecting) writeOut(stream, c);
      break;
    case MsgType::kPortClose:
      c.owed += agentproto::kFrameCost;
      c.host_closed = true;
      if (!c.connecting) writeOut(stream, c);
      break;
    default: break;
  }
  return true;
}

void Ports::poll(PollSet& ps) {
  for (auto& [stream, c] : conns_) {
    short ev = 0;
    if (c.connecting || !c.to_guest.empty()) ev |= POLLOUT;
    // Read only what the host has credit for: a server that writes without
    // end is slowed, not buffered.
    if (!c.connecting && !c.guest_eof && ch_.canSend(stream, agentproto::kDataChunk)) ev |= POLLIN;
    if (!ev) continue;
    ps.add(c.fd, ev, [this, s = stream](short rev) {
      auto it = conns_.find(s);
      if (it == conns_.end()) return;
      Conn& c = it->second;
      if (c.connecting) {
        if (rev & (POLLOUT | POLLERR | POLLHUP)) onConnectDone(s, c);
        return;
      }
      if (rev & (POLLOUT | POLLERR | POLLHUP)) writeOut(s, c);
      it = conns_.find(s);
      if (it == conns_.end()) return;
      // Never beyond the host's credit, whatever woke us.
      if ((rev & (POLLIN | POLLHUP | POLLERR)) && !it->second.guest_eof &&
          ch_.canSend(s, agentproto::kDataChunk))
        onReadable(s, it->second);
    });
  }
}

void Ports::abortAll() {
  for (auto& [stream, c] : conns_)
    if (c.fd >= 0) ::close(c.fd);
  conns_.clear();
}

}  // namespace vessel::agent
