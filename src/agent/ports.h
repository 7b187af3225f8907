#pragma once
// Sandbox ports: TCP connections from the agent to a port on the guest's
// loopback, relayed over the channel (docs/agent-protocol.md, ConnectPort).
// The host's way into a server the sandbox runs, whatever the guest's
// network mode: nothing goes through the guest's interface or the egress
// gateway. Each connection is one stream; bytes flow both ways under the
// stream's credit, and each side half-closes on its own.
#include <cstdint>
#include <map>
#include <string>

#include "agent/channel.h"
#include "agent/poll_set.h"
#include "agentproto/messages.h"

namespace vessel::agent {

// Relayed connections open at once; a host asking for more gets an Error.
constexpr size_t kMaxPortConnections = 256;

// Sets the loopback interface up if it is not: the guest's kernel leaves
// `lo` down, and a connection to 127.0.0.1 then goes nowhere (no refusal
// either) until it times out. Quiet on failure (the agent run on a host
// without the privilege finds it up anyway).
void bringLoopbackUp();

class Ports {
 public:
  explicit Ports(Channel& ch) : ch_(ch) {}
  ~Ports() { abortAll(); }
  Ports(const Ports&) = delete;
  Ports& operator=(const Ports&) = delete;

  // ConnectPort.
  void request(uint32_t stream, const agentproto::Frame& f);
  // PortData, PortClose, Credit, Cancel on a port stream; false if not ours.
  bool onStreamFrame(uint32_t stream, const agentproto::Frame& f);
  // The host went away: every connection is closed.
  void abortAll();
  void poll(PollSet& ps);

 private:
  struct Conn {
    int fd = -1;
    uint16_t port = 0;
    bool connecting = true;
    bool v6 = false;
    // Host bytes not yet written to the socket, and credit owed for the
    // part that was (granted in batches).
    std::string to_guest;
    uint32_t owed = 0;
    bool host_closed = false;  // PortClose from the host
    bool shut_wr = false;      // ...passed on to the guest's server
    bool guest_eof = false;    // the server closed its side; PortClose sent
  };

  // Starts a non-blocking connect to 127.0.0.1 (or ::1); false on an
  // immediate failure with errno set.
  bool connectTo(Conn& c, bool v6);
  void onConnectDone(uint32_t stream, Conn& c);
  void onReadable(uint32_t stream, Conn& c);
  void writeOut(uint32_t stream, Conn& c);
  // Ends the stream when both sides have closed.
  void maybeFinish(uint32_t stream, Conn& c);
  void end(uint32_t stream, const Error* e);

  Channel& ch_;
  std::map<uint32_t, Conn> conns_;
};

}  // namespace vessel::agent
