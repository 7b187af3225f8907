#include "agentclient/agent_client.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <random>

#include "agentclient/agent_client_internal.h"

namespace vessel::agentclient {

using internal::errorFrame;
using internal::Stream;
using internal::waitOn;

namespace {

bool isTerminal(MsgType t) {
  return t == MsgType::kOk || t == MsgType::kError || t == MsgType::kExit;
}

// Whether the guest may send `t` on stream `s` now (docs/agent-protocol.md §6):
// anything else is out of order and fails the channel.
bool allowed(const Stream& s, MsgType t) {
  using internal::Kind;
  switch (t) {
    case MsgType::kError: return true;
    case MsgType::kOk:
      if (s.kind == internal::kProcess) return s.started;
      // A port stream cancelled before it connected ends with Ok.
      if (s.kind == internal::kPort) return s.started || s.cancelled;
      if (s.kind == internal::kPing || s.kind == internal::kStat || s.kind == internal::kXattrs)
        return s.replies == 1;
      if (s.kind == internal::kWatch) return s.replies >= 1;
      return true;
    case MsgType::kExecStarted: return s.kind == internal::kProcess && !s.started;
    case MsgType::kPortConnected: return s.kind == internal::kPort && !s.started;
    case MsgType::kPortData:
    case MsgType::kPortClose: return s.kind == internal::kPort && s.started && !s.peer_closed;
    case MsgType::kVolumeData: return s.kind == internal::kVolume;
    case MsgType::kVolumeKept: return s.kind == internal::kVolume && s.replies == 0;
    case MsgType::kStdout:
    case MsgType::kStderr:
    case MsgType::kExit: return s.kind == internal::kProcess && s.started;
    case MsgType::kPong: return s.kind == internal::kPing && s.replies == 0;
    case MsgType::kStatResult: return s.kind == internal::kStat && s.replies == 0;
    case MsgType::kXattrsResult: return s.kind == internal::kXattrs && s.replies == 0;
    case MsgType::kProcList: return s.kind == internal::kProcList;
    case MsgType::kListEntries: return s.kind == internal::kList;
    case MsgType::kFileData: return s.kind == internal::kRead;
    case MsgType::kWatchEvent: return s.kind == internal::kWatch;
    default: return false;  // host-to-guest types, handshake types
  }
}

}  // namespace

// Waits until `t` is cancelled (notified). Honors the caller's cancellation
// (e.g. a timeout raced with ||) so a waiting call never outlives it.
asio::awaitable<Status> internal::waitOn(asio::steady_timer& t) {
  auto cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none)
    co_return Error(Code::kDeadlineExceeded, "agent call cancelled");
  co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  if (cs.cancelled() != asio::cancellation_type::none)
    co_return Error(Code::kDeadlineExceeded, "agent call cancelled");
  co_return okStatus();
}

Error internal::errorFrame(const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::ErrorMsg>(f.payload);
  if (!m.ok()) return std::move(m).error();
  return agentproto::fromErrorMsg(*m);
}

std::optional<Error> internal::olderAgent(const Error& e, const std::string& agent,
                                          const std::string& feature) {
  if (e.code() != Code::kInvalidArgument ||
      e.message().find("unsupported request type") == std::string::npos)
    return std::nullopt;
  return Error(Code::kFailedPrecondition, agent + ": its agent is older than " + feature +
                                              "; rebuild the sandbox's template with this Vessel");
}

// --- AgentClient: channel ---------------------------------------------------

AgentClient::AgentClient(Socket channel, std::string leftover, std::string name)
    : sock_(std::move(channel)), name_(std::move(name)), leftover_(std::move(leftover)) {}

AgentClient::~AgentClient() = default;

std::shared_ptr<AgentClient> AgentClient::create(Socket channel, std::string leftover,
                                                 std::string name) {
  std::shared_ptr<AgentClient> c(
      new AgentClient(std::move(channel), std::move(leftover), std::move(name)));
  c->start();
  return c;
}

asio::awaitable<Result<std::shared_ptr<AgentClient>>> AgentClient::reconnect(
    Socket sock, std::string name, std::chrono::steady_clock::time_point deadline, bool in_step) {
  using namespace asio::experimental::awaitable_operators;
  std::random_device rd;
  std::vector<char> buf(64 * 1024);
  std::string window;
  size_t scanned = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    uint64_t nonce = (static_cast<uint64_t>(rd()) << 32) | rd();
    std::string sig = *agentproto::encodeMsgFrame(0, agentproto::ResyncMsg{nonce});
    // Zeros first: they complete a frame the old host may have left half
    // written in the agent's decoder, then parse as empty control frames
    // (a whole number of 12-byte headers, so an in-step decoder stays in
    // step). A decoder they leave out of step fails, resets, and the next
    // attempt gets through.
    constexpr size_t kHeaders = (agentproto::kMaxPayload / agentproto::kHeaderSize) + 2;
    std::string req(in_step ? 0 : kHeaders * agentproto::kHeaderSize, '\0');
    in_step = false;
    req += sig;
    auto [wec, wn] =
        co_await asio::async_write(sock, asio::buffer(req), asio::as_tuple(asio::use_awaitable));
    if (wec) co_return Error(Code::kUnavailable, name + ": reconnect: write: " + wec.message());
    auto attempt_end =
        std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(2));
    for (;;) {
      if (size_t pos = window.find(sig); pos != std::string::npos) {
        auto c = create(std::move(sock), window.substr(pos + sig.size()), std::move(name));
        co_return c;
      }
      // Only a tail that could begin the echo is worth keeping.
      if (window.size() >= sig.size()) window.erase(0, window.size() - sig.size() + 1);
      if (std::chrono::steady_clock::now() >= attempt_end) break;
      asio::steady_timer t(sock.get_executor(), attempt_end);
      auto r =
          co_await (sock.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable)) ||
                    t.async_wait(asio::as_tuple(asio::use_awaitable)));
      if (r.index() == 1) break;  // no echo yet: ask again with a new nonce
      auto [ec, n] = std::get<0>(r);
      if (ec) co_return Error(Code::kUnavailable, name + ": reconnect: read: " + ec.message());
      scanned += n;
      if (scanned > (64u << 20))
        co_return Error(Code::kProtocol, name + ": reconnect: no resync echo in 64 MiB");
      window.append(buf.data(), n);
    }
  }
  co_return Error(Code::kDeadlineExceeded, name + ": reconnect: the agent did not resync in time");
}

void AgentClient::start() {
  asio::co_spawn(sock_.get_executor(), readLoop(shared_from_this()), asio::detached);
}

size_t AgentClient::bufferedBytes() const {
  size_t n = 0;
  for (const auto& [id, s] : streams_)
    for (const auto& f : s->inbox) n += frameCost(f.payload.size());
  return n;
}

void AgentClient::close() { fail(Error(Code::kUnavailable, "agent client closed")); }

Error AgentClient::streamError(const char* what) const {
  if (failure_) return *failure_;
  return Error(Code::kFailedPrecondition, name_ + ": " + what);
}

void AgentClient::fail(Error e) {
  if (failure_) return;
  failure_ = std::move(e).withContext("agent channel of " + name_);
  for (auto& [id, s] : streams_) {
    s->ended = true;
    s->notify();
  }
  streams_.clear();
  outq_.clear();
  boost::system::error_code ec;
  sock_.close(ec);
  for (auto* t : closed_waiters_) t->cancel();
}

asio::awaitable<void> AgentClient::waitClosed() {
  if (failure_) co_return;
  auto self = shared_from_this();
  asio::steady_timer t(sock_.get_executor(), asio::steady_timer::time_point::max());
  closed_waiters_.insert(&t);
  (void)co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  self->closed_waiters_.erase(&t);
}

asio::awaitable<void> AgentClient::readLoop(std::shared_ptr<AgentClient> self) {
  if (!leftover_.empty()) {
    Status st = decoder_.feed(leftover_);
    leftover_.clear();
    if (!st.ok()) fail(std::move(st).error());
    drainDecoder();
  }
  std::vector<char> buf(64 * 1024);
  while (!failure_) {
    auto [ec, n] =
        co_await sock_.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    if (failure_) break;
    if (ec) {
      fail(Error(Code::kUnavailable, ec == asio::error::eof
                                         ? std::string("the guest closed the channel")
                                         : "read: " + ec.message()));
      break;
    }
    Status st = decoder_.feed(std::string_view(buf.data(), n));
    if (!st.ok()) {
      fail(std::move(st).error());
      break;
    }
    drainDecoder();
  }
}

void AgentClient::drainDecoder() {
  while (!failure_) {
    auto f = decoder_.next();
    if (!f.ok()) return fail(std::move(f).error());
    if (!f->has_value()) return;
    Status st = onFrame(std::move(**f));
    if (!st.ok()) return fail(std::move(st).error());
  }
}

Status AgentClient::onFrame(Frame f) {
  auto name = std::string(agentproto::msgTypeName(f.type));
  VESSEL_TRY_CTX(agentproto::validatePayload(f.type, f.payload),
                 "frame " + name + " on stream " + std::to_string(f.stream));
  if (f.stream == 0) {
    if (f.type == MsgType::kError) return errorFrame(f).withContext("guest reported");
    return Error(Code::kProtocol, "unexpected " + name + " on the control stream");
  }
  auto it = streams_.find(f.stream);
  if (it == streams_.end())
    return Error(Code::kProtocol,
                 name + " on stream " + std::to_string(f.stream) + " that is not open");
  std::shared_ptr<Stream> s = it->second;
  if (s->reply_by != asio::steady_timer::time_point::max()) {
    // Answered: later waits on this stream are unbounded again.
    s->reply_by = asio::steady_timer::time_point::max();
    s->wake.expires_at(s->reply_by);
  }
  if (f.type == MsgType::kCredit) {
    auto c = agentproto::decodeMsg<agentproto::CreditMsg>(f.payload);
    s->send_credit += c->bytes;
    if (s->send_credit > agentproto::kMaxCredit)
      return Error(Code::kProtocol, "credit overflow on stream " + std::to_string(f.stream));
    s->notify();
    return okStatus();
  }
  if (!allowed(*s, f.type))
    return Error(Code::kProtocol,
                 "out-of-order " + name + " on stream " + std::to_string(f.stream));
  uint32_t cost = frameCost(f.payload.size());
  if (cost > s->recv_credit)
    return Error(Code::kProtocol,
                 name + " beyond the granted credit on stream " + std::to_string(f.stream));
  s->recv_credit -= cost;
  if (f.type == MsgType::kExecStarted || f.type == MsgType::kPortConnected) s->started = true;
  if (f.type == MsgType::kPortClose) s->peer_closed = true;
  if (isTerminal(f.type)) {
    s->ended = true;
    streams_.erase(it);
  } else {
    ++s->replies;
  }
  if (s->cancelled) {
    // Nobody will read it: hand the credit straight back so the guest can
    // reach the stream's end.
    if (!s->ended) grant(*s, cost, false);
  } else {
    s->inbox.push_back(std::move(f));
  }
  s->notify();
  return okStatus();
}

void AgentClient::grant(Stream& s, uint32_t cost, bool force) {
  s.to_grant += cost;
  if (s.ended || s.to_grant == 0) return;
  if (!force && s.to_grant < kInitialWindow / 4) return;
  uint32_t n = static_cast<uint32_t>(s.to_grant);
  s.to_grant = 0;
  s.recv_credit += n;
  enqueue(*agentproto::encodeMsgFrame(s.id, agentproto::CreditMsg{n}));
}

void AgentClient::enqueue(std::string bytes) {
  if (failure_) return;
  outq_.push_back(std::move(bytes));
  if (!writing_) {
    writing_ = true;
    asio::co_spawn(sock_.get_executor(), writeLoop(shared_from_this()), asio::detached);
  }
}

asio::awaitable<void> AgentClient::writeLoop(std::shared_ptr<AgentClient> self) {
  std::string batch;
  while (!outq_.empty() && !failure_) {
    // Coalesce small frames (credits, requests) into one write.
    batch.clear();
    while (!outq_.empty() && batch.size() < 256 * 1024) {
      batch += outq_.front();
      outq_.pop_front();
    }
    auto [ec, n] =
        co_await asio::async_write(sock_, asio::buffer(batch), asio::as_tuple(asio::use_awaitable));
    if (ec && !failure_) fail(Error(Code::kUnavailable, "write: " + ec.message()));
  }
  writing_ = false;
}

// --- AgentClient: streams ---------------------------------------------------

asio::awaitable<Result<Frame>> AgentClient::recv(Stream& s) {
  for (;;) {
    if (!s.inbox.empty()) {
      Frame f = std::move(s.inbox.front());
      s.inbox.pop_front();
      if (agentproto::costsCredit(f.type)) grant(s, frameCost(f.payload.size()), false);
      co_return f;
    }
    if (failure_) co_return *failure_;
    if (s.ended) co_return streamError("stream already ended");
    VESSEL_CO_TRY(co_await awaitFrame(s));
  }
}

asio::awaitable<Status> AgentClient::awaitFrame(Stream& s) {
  if (s.reply_by != asio::steady_timer::time_point::max()) {
    if (asio::steady_timer::clock_type::now() >= s.reply_by)
      co_return Error(Code::kDeadlineExceeded,
                      name_ + ": the agent did not answer " +
                          std::string(agentproto::msgTypeName(s.request)) + " within " +
                          std::to_string(reply_timeout_.count()) +
                          " ms (its guest is overloaded or its agent is not running)");
    // Woken at the deadline if nothing comes; onFrame() resets it.
    s.wake.expires_at(s.reply_by);
  }
  co_return co_await waitOn(s.wake);
}

asio::awaitable<Status> AgentClient::sendData(Stream& s, MsgType type, std::string_view payload) {
  uint32_t cost = frameCost(payload.size());
  for (;;) {
    if (failure_) co_return *failure_;
    if (s.ended) {
      // The guest ended the stream early (e.g. a write failed): its Error is
      // the answer.
      for (const auto& f : s.inbox)
        if (f.type == MsgType::kError) co_return errorFrame(f);
      co_return streamError("stream already ended");
    }
    if (s.send_credit >= cost) break;
    VESSEL_CO_TRY(co_await awaitFrame(s));
  }
  s.send_credit -= cost;
  enqueue(agentproto::encodeFrame(type, s.id, payload));
  co_return okStatus();
}

void AgentClient::cancel(Stream& s) {
  if (s.ended || s.cancelled || failure_) return;
  s.cancelled = true;
  uint32_t pending = 0;
  for (const auto& f : s.inbox)
    if (agentproto::costsCredit(f.type)) pending += frameCost(f.payload.size());
  s.inbox.clear();
  grant(s, pending, true);
  enqueue(agentproto::encodeFrame(MsgType::kCancel, s.id, ""));
}

asio::awaitable<Status> AgentClient::ping() {
  if (failure_) co_return *failure_;
  auto s = std::make_shared<Stream>(sock_.get_executor());
  s->id = next_stream_++;
  s->kind = internal::kPing;
  s->send_credit -= frameCost(4);
  if (reply_timeout_.count() > 0)
    s->reply_by = asio::steady_timer::clock_type::now() + reply_timeout_;
  streams_[s->id] = s;
  enqueue(agentproto::encodeFrame(MsgType::kPing, s->id, "ping"));
  for (;;) {
    auto got = co_await recv(*s);
    if (!got.ok()) {
      cancel(*s);
      co_return std::move(got).error();
    }
    Frame f = std::move(*got);
    if (f.type == MsgType::kOk) co_return okStatus();
    if (f.type == MsgType::kError) co_return errorFrame(f);
    if (f.payload != "ping") co_return Error(Code::kProtocol, name_ + ": pong does not echo ping");
  }
}

asio::awaitable<Status> AgentClient::setHostname(std::string name) {
  agentproto::SetHostnameMsg m = agentproto::SetHostnameMsg{std::move(name)};
  auto op = callStatus(internal::kSimple, std::move(m));
  co_return co_await std::move(op);
}

asio::awaitable<Status> AgentClient::setClock(std::chrono::system_clock::time_point t) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  agentproto::SetClockMsg m = agentproto::SetClockMsg{ns};
  auto op = callStatus(internal::kSimple, std::move(m));
  co_return co_await std::move(op);
}

asio::awaitable<Status> AgentClient::addEntropy(std::string bytes) {
  agentproto::AddEntropyMsg m = agentproto::AddEntropyMsg{std::move(bytes)};
  auto op = callStatus(internal::kSimple, std::move(m));
  co_return co_await std::move(op);
}

asio::awaitable<Status> AgentClient::growRootFs(uint64_t device_bytes) {
  agentproto::GrowRootFsMsg m = agentproto::GrowRootFsMsg{device_bytes};
  auto op = callStatus(internal::kSimple, std::move(m));
  co_return co_await std::move(op);
}

asio::awaitable<Status> AgentClient::setDefaultEnv(std::vector<std::string> env) {
  agentproto::SetEnvMsg m = agentproto::SetEnvMsg{std::move(env)};
  auto op = callStatus(internal::kSimple, std::move(m));
  co_return co_await std::move(op);
}

asio::awaitable<Status> AgentClient::setNetwork(agentproto::SetNetworkMsg m) {
  auto op = callStatus(internal::kSimple, std::move(m));
  co_return co_await std::move(op);
}

}  // namespace vessel::agentclient
