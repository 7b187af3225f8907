// AgentClient::mountVolume and its VolumeStream: a FUSE session in the
// guest relayed by the agent, one FUSE message per VolumeData frame.
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>

#include "agentclient/agent_client.h"
#include "agentclient/agent_client_internal.h"

namespace vessel::agentclient {

using internal::errorFrame;

asio::awaitable<Result<std::unique_ptr<VolumeStream>>> AgentClient::mountVolume(std::string path,
                                                                                bool read_only,
                                                                                bool keep_session) {
  agentproto::MountVolumeMsg m;
  m.path = path;
  m.flags = (read_only ? agentproto::MountVolumeMsg::kReadOnly : 0) |
            (keep_session ? agentproto::MountVolumeMsg::kKeepSession : 0);
  VESSEL_CO_ASSIGN_OR_RETURN(auto s, open(internal::kVolume, m));
  auto got = co_await recv(*s);
  if (!got.ok()) {
    cancel(*s);
    co_return std::move(got).error();
  }
  if (got->type == MsgType::kError) {
    Error e = errorFrame(*got);
    if (auto older = internal::olderAgent(e, name_, "volumes (MountVolume)"))
      co_return std::move(*older);
    co_return std::move(e).withContext(name_ + ": mount volume at " + path);
  }
  if (got->type == MsgType::kVolumeKept) {
    if (!keep_session)
      co_return Error(Code::kProtocol, name_ + ": mount volume at " + path +
                                           ": a session kept that was not asked to be");
    co_return std::make_unique<VolumeStream>(shared_from_this(), std::move(s), std::nullopt);
  }
  if (got->type != MsgType::kVolumeData)  // Ok before any request: the mount is gone
    co_return Error(Code::kUnavailable, name_ + ": mount volume at " + path + ": session ended");
  std::optional<std::string> init(std::move(got->payload));
  co_return std::make_unique<VolumeStream>(shared_from_this(), std::move(s), std::move(init));
}

asio::awaitable<Status> AgentClient::quiesceVolumes(bool release) {
  agentproto::QuiesceVolumesMsg m;
  m.flags = release ? agentproto::QuiesceVolumesMsg::kRelease : 0;
  auto op = callStatus(internal::kSimple, m);
  Status s = co_await std::move(op);
  if (!s.ok())
    if (auto older = internal::olderAgent(s.error(), name_, "volumes kept (QuiesceVolumes)"))
      co_return std::move(*older);
  co_return s;
}

VolumeStream::VolumeStream(std::shared_ptr<AgentClient> c, std::shared_ptr<internal::Stream> s,
                           std::optional<std::string> first)
    : c_(std::move(c)), s_(std::move(s)), first_(std::move(first)), kept_(!first_) {}

VolumeStream::~VolumeStream() { close(); }

void VolumeStream::close() {
  if (closed_) return;
  closed_ = ended_ = true;
  c_->cancel(*s_);  // nothing if the stream has ended
}

asio::awaitable<Result<std::optional<std::string>>> VolumeStream::read() {
  if (first_) {
    std::string m = std::move(*first_);
    first_.reset();
    co_return std::optional<std::string>(std::move(m));
  }
  if (ended_) co_return std::optional<std::string>();
  auto f = co_await c_->recv(*s_);
  if (!f.ok()) {
    ended_ = true;
    if (closed_) co_return std::optional<std::string>();  // close() ended it
    co_return std::move(f).error();
  }
  switch (f->type) {
    case MsgType::kVolumeData: co_return std::optional<std::string>(std::move(f->payload));
    case MsgType::kError: ended_ = true; co_return errorFrame(*f);
    default:  // Ok: unmounted in the guest
      ended_ = true;
      co_return std::optional<std::string>();
  }
}

asio::awaitable<Status> VolumeStream::write(std::string_view message) {
  if (ended_) co_return Error(Code::kFailedPrecondition, "volume stream: ended");
  if (message.empty() || message.size() > agentproto::kMaxVolumeMessage)
    co_return Error(Code::kInvalidArgument,
                    "volume stream: an answer of " + std::to_string(message.size()) + " bytes");
  co_return co_await c_->sendData(*s_, MsgType::kVolumeData, message);
}

namespace {

// A FUSE request starts with its header (struct fuse_in_header, 40 bytes)
// whose first field, little-endian, is the request's whole length.
constexpr size_t kFuseInHeader = 40;

bool wholeRequest(std::string_view m) {
  if (m.size() < kFuseInHeader) return false;
  uint32_t len = static_cast<uint8_t>(m[0]) |
                 static_cast<uint32_t>(static_cast<uint8_t>(m[1])) << 8 |
                 static_cast<uint32_t>(static_cast<uint8_t>(m[2])) << 16 |
                 static_cast<uint32_t>(static_cast<uint8_t>(m[3])) << 24;
  return len == m.size();
}

}  // namespace

// A descriptor that waits on the socket without owning it (one for both
// directions: the reactor registers an fd once).
struct VolumeStream::Waiter {
  asio::posix::stream_descriptor d;
  Waiter(const asio::any_io_executor& ex, int fd) : d(ex, fd) {}
  ~Waiter() { (void)d.release(); }
};

asio::awaitable<Status> VolumeStream::guestToServer(int sock, Waiter& w) {
  for (;;) {
    auto m = co_await read();
    if (!m.ok()) co_return std::move(m).error();
    if (!*m) co_return okStatus();  // unmounted in the guest
    if (!wholeRequest(**m))
      co_return Error(Code::kProtocol, "volume: the guest sent a malformed FUSE request");
    for (;;) {
      ssize_t n = ::send(sock, (*m)->data(), (*m)->size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n >= 0) break;
      if (errno == EINTR) continue;
      if (errno != EAGAIN) co_return okStatus();  // the server is gone
      auto [ec] = co_await w.d.async_wait(asio::posix::stream_descriptor::wait_write,
                                          asio::as_tuple(asio::use_awaitable));
      if (ec) co_return okStatus();
    }
  }
}

asio::awaitable<Status> VolumeStream::serverToGuest(int sock, Waiter& w) {
  std::string buf(agentproto::kMaxVolumeMessage + 1, '\0');
  for (;;) {
    ssize_t n = ::recv(sock, buf.data(), buf.size(), MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      auto [ec] = co_await w.d.async_wait(asio::posix::stream_descriptor::wait_read,
                                          asio::as_tuple(asio::use_awaitable));
      if (ec) co_return okStatus();
      continue;
    }
    if (n <= 0) co_return okStatus();  // the server exited
    if (static_cast<size_t>(n) > agentproto::kMaxVolumeMessage)
      co_return Error(Code::kInternal,
                      "volume: the file server answered " + std::to_string(n) + " bytes");
    VESSEL_CO_TRY(co_await write(std::string_view(buf.data(), static_cast<size_t>(n))));
  }
}

asio::awaitable<Status> VolumeStream::relay(int sock) {
  using namespace asio::experimental::awaitable_operators;
  Waiter w(co_await asio::this_coro::executor, sock);
  // Whichever side ends first ends the other (cancelled).
  auto r = co_await (guestToServer(sock, w) || serverToGuest(sock, w));
  co_return r.index() == 0 ? std::get<0>(std::move(r)) : std::get<1>(std::move(r));
}

}  // namespace vessel::agentclient
