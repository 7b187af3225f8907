#pragma once
// The agent's handshake (docs/agent-protocol.md): the guest says Hello, the
// host checks the version range and answers HelloAck. What the guest sent
// after its Hello is handed on, undecoded, to the AgentClient that takes over.
#include <boost/asio/awaitable.hpp>
#include <string>

#include "agentclient/agent_client.h"
#include "agentproto/messages.h"
#include "base/result.h"

namespace vessel::agentclient {

struct Handshake {
  agentproto::Hello hello;
  std::string leftover;
};

asio::awaitable<Result<Handshake>> handshake(AgentClient::Socket& channel);

}  // namespace vessel::agentclient
