#pragma once
// Internals shared by agent_client.cc and agent_client_handles.cc: the
// per-stream state and the templates that open streams.
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <optional>

#include "agentclient/agent_client.h"

namespace vessel::agentclient {

using agentproto::Frame;
using agentproto::frameCost;
using agentproto::kInitialWindow;
using agentproto::MsgType;

namespace internal {

// What a stream was opened for decides which frames the guest may send on it.
enum Kind {
  kSimple,
  kPing,
  kStat,
  kProcList,
  kList,
  kProcess,
  kRead,
  kWrite,
  kWatch,
  kXattrs,
  kPort,
  kVolume
};

struct Stream {
  explicit Stream(const asio::any_io_executor& ex)
      : wake(ex, asio::steady_timer::time_point::max()) {}
  uint32_t id = 0;
  int kind = kSimple;
  std::deque<Frame> inbox;
  uint64_t recv_credit = kInitialWindow;  // what the guest may still send us
  uint64_t to_grant = 0;                  // consumed, not yet returned as Credit
  uint64_t send_credit = kInitialWindow;  // what we may still send
  uint32_t replies = 0;                   // non-terminal frames received
  bool started = false;                   // process: ExecStarted seen; port: PortConnected
  bool peer_closed = false;               // port: the guest's PortClose seen
  bool ended = false;                     // terminal frame received or channel failed
  bool cancelled = false;                 // nobody reads: discard until terminal
  // The guest must have sent this stream's first frame by then (the reply
  // deadline, AgentClient::setReplyTimeout); max: no deadline (any more).
  asio::steady_timer::time_point reply_by = asio::steady_timer::time_point::max();
  MsgType request = MsgType::kPing;  // what the stream was opened with
  asio::steady_timer wake;           // cancelled to wake waiters
  void notify() { wake.cancel(); }
};

Error errorFrame(const Frame& f);
// An agent built before `feature` (e.g. "volumes (MountVolume)") refuses
// its request type itself: `e` said as the template to rebuild, or nullopt
// for any other error.
std::optional<Error> olderAgent(const Error& e, const std::string& agent,
                                const std::string& feature);
asio::awaitable<Status> waitOn(asio::steady_timer& t);

}  // namespace internal

using internal::Stream;

template <typename M>
Result<std::shared_ptr<Stream>> AgentClient::open(int kind, const M& m) {
  if (failure_) return *failure_;
  VESSEL_ASSIGN_OR_RETURN(std::string payload, agentproto::encodeMsg(m));
  if (next_stream_ == 0) {
    fail(Error(Code::kResourceExhausted, "stream ids exhausted"));
    return *failure_;
  }
  auto s = std::make_shared<Stream>(sock_.get_executor());
  s->id = next_stream_++;
  s->kind = kind;
  s->send_credit -= frameCost(payload.size());
  s->request = M::kType;
  // A write's first answer comes after its data: no deadline from here.
  if (reply_timeout_.count() > 0 && kind != internal::kWrite)
    s->reply_by = asio::steady_timer::clock_type::now() + reply_timeout_;
  streams_[s->id] = s;
  enqueue(agentproto::encodeFrame(M::kType, s->id, payload));
  return s;
}

template <typename M, typename F>
asio::awaitable<Status> AgentClient::callEach(int kind, M m, F each) {
  VESSEL_CO_ASSIGN_OR_RETURN(auto s, open(kind, m));
  size_t bytes = 0;
  for (;;) {
    auto got = co_await recv(*s);
    if (!got.ok()) {
      // The caller gave up (deadline): tell the guest to end the stream.
      cancel(*s);
      co_return std::move(got).error();
    }
    Frame f = std::move(*got);
    if (f.type == MsgType::kOk) co_return okStatus();
    if (f.type == MsgType::kError) co_return internal::errorFrame(f);
    bytes += f.payload.size();
    // Replies are consumed eagerly, so credit alone does not bound them.
    if (bytes > kMaxReplyBytes) {
      cancel(*s);
      co_return Error(Code::kResourceExhausted,
                      name_ + ": " + std::string(agentproto::msgTypeName(M::kType)) +
                          " reply above " + std::to_string(kMaxReplyBytes >> 20) + " MiB");
    }
    if (Status st = each(f); !st.ok()) {
      cancel(*s);
      co_return st;
    }
  }
}

template <typename M>
asio::awaitable<Result<std::vector<Frame>>> AgentClient::call(int kind, M m) {
  std::vector<Frame> out;
  // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
  auto collect = [&out](Frame& f) {
    out.push_back(std::move(f));
    return okStatus();
  };
  auto op = callEach(kind, std::move(m), collect);
  Status st = co_await std::move(op);
  if (!st.ok()) co_return std::move(st).error();
  co_return out;
}

// Like call(), for requests whose only answer is Ok or Error.
template <typename M>
asio::awaitable<Status> AgentClient::callStatus(int kind, M m) {
  // g++ 12: the awaitable in its own statement, not a temporary across the
  // co_await; see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
  auto op = call(kind, std::move(m));
  auto r = co_await std::move(op);
  if (!r.ok()) co_return std::move(r).error();
  co_return okStatus();
}

}  // namespace vessel::agentclient
