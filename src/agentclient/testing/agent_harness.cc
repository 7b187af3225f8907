#include "agentclient/testing/agent_harness.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include "agentclient/handshake.h"
#include "base/fd.h"

namespace vessel::agentclient::testing {

Result<std::unique_ptr<HostAgent>> HostAgent::start(asio::io_context& io,
                                                    const std::string& agent_binary) {
  auto h = std::unique_ptr<HostAgent>(new HostAgent());
  char tmpl[] = "/tmp/vessel-agent-passwd-XXXXXX";
  int pfd = ::mkstemp(tmpl);
  if (pfd < 0) return Error::fromErrno("mkstemp");
  ::close(pfd);
  h->passwd_ = tmpl;
  VESSEL_TRY(writeFileAtomic(h->passwd_,
                             "root:x:0:0:root:/root:/bin/sh\n"
                             "user:x:1000:1000:user:/tmp:/bin/sh\n"));
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Error::fromErrno("socketpair");
  Fd host(sv[0]), guest(sv[1]);
  SpawnOptions o;
  o.argv = {agent_binary, "--channel-fd", "3", "--passwd", h->passwd_};
  o.fds = {{guest.get(), 3}, {2, 2}};
  o.die_with_parent = true;
  VESSEL_ASSIGN_OR_RETURN(h->child_, ChildProcess::spawn(o));
  guest.reset();
  AgentClient::Socket sock(io);
  sock.assign(asio::local::stream_protocol(), host.release());
  VESSEL_ASSIGN_OR_RETURN(Handshake m, runFor(io, handshake(sock), std::chrono::seconds(10)));
  h->client_ = AgentClient::create(std::move(sock), std::move(m.leftover), "host-agent");
  return h;
}

HostAgent::~HostAgent() {
  if (client_) client_->close();
  if (child_.running()) (void)child_.terminate(std::chrono::milliseconds(2000));
  if (!passwd_.empty()) ::unlink(passwd_.c_str());
}

std::string Sha256::hex() {
  unsigned char md[32];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx_, md, &n);
  std::string out;
  char b[3];
  for (unsigned i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", md[i]);
    out += b;
  }
  return out;
}

std::string PatternSource::next(size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    x_ ^= x_ << 13;
    x_ ^= x_ >> 7;
    x_ ^= x_ << 17;
    for (size_t j = 0; j < 8 && i + j < n; ++j) out[i + j] = static_cast<char>(x_ >> (8 * j));
  }
  return out;
}

}  // namespace vessel::agentclient::testing
