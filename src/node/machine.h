#pragma once
// A Machine is a started VM whose guest agent has said Hello: the point at
// which a sandbox is "ready". bootMachine races the agent's handshake against
// the VMM exiting and the deadline, and leaves nothing running on failure.
#include <memory>
#include <string>

#include "agentproto/frame.h"
#include "hypervisor/hypervisor.h"

namespace vessel::node {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct Machine {
  std::unique_ptr<hypervisor::Vm> vm;
  agentproto::Hello hello;
  // Bytes the guest sent after its Hello, not yet decoded; the AgentClient
  // that takes over vm->agentChannel() must consume these first.
  std::string leftover;
};

asio::awaitable<Result<Machine>> bootMachine(hypervisor::Hypervisor& hv,
                                             hypervisor::MachineSpec spec,
                                             Clock::time_point deadline);

// Waits for the guest's Hello on a connected channel, checks its version and
// answers HelloAck. Public for tests with a fake guest.
asio::awaitable<Result<Machine>> agentHandshake(hypervisor::Socket& channel);

}  // namespace vessel::node
