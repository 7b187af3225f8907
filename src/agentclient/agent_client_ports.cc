// AgentClient::connectPort and its PortStream: a TCP connection to a port
// inside the guest, relayed by the agent under the stream's credit.
#include "agentclient/agent_client.h"
#include "agentclient/agent_client_internal.h"

namespace vessel::agentclient {

using internal::errorFrame;

asio::awaitable<Result<std::unique_ptr<PortStream>>> AgentClient::connectPort(uint16_t port) {
  VESSEL_CO_ASSIGN_OR_RETURN(auto s, open(internal::kPort, agentproto::ConnectPortMsg{port}));
  auto got = co_await recv(*s);
  if (!got.ok()) {
    // Given up (deadline): the guest must not keep a connection nobody reads.
    cancel(*s);
    co_return std::move(got).error();
  }
  if (got->type == MsgType::kError) {
    Error e = errorFrame(*got);
    if (auto older = internal::olderAgent(e, name_, "sandbox ports (ConnectPort)"))
      co_return std::move(*older);
    co_return std::move(e).withContext(name_ + ": port " + std::to_string(port));
  }
  co_return std::make_unique<PortStream>(shared_from_this(), std::move(s));
}

PortStream::PortStream(std::shared_ptr<AgentClient> c, std::shared_ptr<internal::Stream> s)
    : c_(std::move(c)), s_(std::move(s)) {}

PortStream::~PortStream() {
  close();
  if (note_) c_->notePort(*note_);
}

void PortStream::logAs(std::string origin, std::string peer, uint16_t port) {
  PortNote n;
  n.origin = std::move(origin);
  n.peer = std::move(peer);
  n.port = port;
  n.started = std::chrono::steady_clock::now();
  n.started_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  note_ = std::move(n);
}

void PortStream::close() {
  if (ended_) return;
  ended_ = true;
  c_->cancel(*s_);
}

asio::awaitable<Result<std::optional<std::string>>> PortStream::read() {
  if (eof_ || ended_) co_return std::optional<std::string>();
  auto f = co_await c_->recv(*s_);
  if (!f.ok()) {
    ended_ = true;
    co_return std::move(f).error();
  }
  switch (f->type) {
    case MsgType::kPortData:
      if (note_) note_->bytes_out += f->payload.size();
      co_return std::optional<std::string>(std::move(f->payload));
    case MsgType::kPortClose: eof_ = true; co_return std::optional<std::string>();
    case MsgType::kError: eof_ = ended_ = true; co_return errorFrame(*f);
    default:  // Ok: both sides closed
      eof_ = ended_ = true;
      co_return std::optional<std::string>();
  }
}

asio::awaitable<Status> PortStream::write(std::string_view data) {
  if (wclosed_) co_return Error(Code::kFailedPrecondition, "port stream: written after closeWrite");
  while (!data.empty()) {
    size_t n = std::min(data.size(), agentproto::kDataChunk);
    VESSEL_CO_TRY(co_await c_->sendData(*s_, MsgType::kPortData, data.substr(0, n)));
    if (note_) note_->bytes_in += n;
    data.remove_prefix(n);
  }
  co_return okStatus();
}

asio::awaitable<Status> PortStream::closeWrite() {
  if (wclosed_) co_return okStatus();
  wclosed_ = true;
  co_return co_await c_->sendData(*s_, MsgType::kPortClose, "");
}

}  // namespace vessel::agentclient
