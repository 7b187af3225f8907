#include "agentclient/handshake.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace vessel::agentclient {

using agentproto::MsgType;

asio::awaitable<Result<Handshake>> handshake(AgentClient::Socket& channel) {
  agentproto::FrameDecoder dec;
  char buf[4096];
  for (;;) {
    auto [ec, n] =
        co_await channel.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    if (ec)
      co_return Error(Code::kUnavailable, "agent channel closed before hello: " + ec.message());
    VESSEL_CO_TRY(dec.feed(std::string_view(buf, n)));
    auto f = dec.next();
    if (!f.ok()) co_return std::move(f).error().withContext("agent handshake");
    if (!f->has_value()) continue;
    const agentproto::Frame& frame = **f;
    if (frame.type != MsgType::kHello)
      co_return Error(Code::kProtocol, "agent handshake: first frame has type " +
                                           std::to_string(static_cast<int>(frame.type)) +
                                           ", not hello");
    auto hello = agentproto::decodeHello(frame.payload);
    if (!hello.ok()) co_return std::move(hello).error();
    if (hello->min_version > agentproto::kProtocolVersion ||
        hello->max_version < agentproto::kProtocolVersion)
      co_return Error(Code::kProtocol, "agent speaks protocol versions " +
                                           std::to_string(hello->min_version) + "-" +
                                           std::to_string(hello->max_version) + ", host speaks " +
                                           std::to_string(agentproto::kProtocolVersion));
    std::string ack = agentproto::encodeFrame(
        MsgType::kHelloAck, 0, agentproto::encodeHelloAck({agentproto::kProtocolVersion}));
    auto [wec, wn] =
        co_await asio::async_write(channel, asio::buffer(ack), asio::as_tuple(asio::use_awaitable));
    if (wec) co_return Error(Code::kUnavailable, "agent handshake: write ack: " + wec.message());
    Handshake h;
    h.hello = std::move(*hello);
    h.leftover = dec.takeBuffered();
    co_return h;
  }
}

}  // namespace vessel::agentclient
