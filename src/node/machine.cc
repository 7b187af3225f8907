#include "node/machine.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "base/log.h"

namespace vessel::node {

using agentproto::MsgType;

asio::awaitable<Result<Machine>> agentHandshake(hypervisor::Socket& channel) {
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
    Machine m;
    m.hello = std::move(*hello);
    m.leftover = dec.takeBuffered();
    co_return m;
  }
}

asio::awaitable<Result<Machine>> bootMachine(hypervisor::Hypervisor& hv,
                                             hypervisor::MachineSpec spec,
                                             Clock::time_point deadline) {
  using namespace asio::experimental::awaitable_operators;
  const std::string id = spec.id;
  Logger log("node", id);
  auto started = Clock::now();
  auto vm = co_await hv.start(std::move(spec), deadline);
  if (!vm.ok()) co_return std::move(vm).error();

  asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
  auto r = co_await (agentHandshake((*vm)->agentChannel()) || (*vm)->waitExit() ||
                     timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  Error err(Code::kInternal, "");
  switch (r.index()) {
    case 0: {
      auto& m = std::get<0>(r);
      if (m.ok()) {
        m->vm = std::move(*vm);
        log.info(
            "guest ready in {} ms ({})",
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count(),
            m->hello.agent_version);
        co_return std::move(m);
      }
      err = std::move(m).error();
      // A channel that closes is usually the VMM exiting: say how it ended.
      if (err.code() == Code::kUnavailable) {
        asio::steady_timer grace(co_await asio::this_coro::executor,
                                 std::chrono::milliseconds(500));
        auto w =
            co_await ((*vm)->waitExit() || grace.async_wait(asio::as_tuple(asio::use_awaitable)));
        if (w.index() == 0)
          err = Error(Code::kUnavailable,
                      "hypervisor exited before the guest was ready: " + std::get<0>(w).describe());
      }
      break;
    }
    case 1:
      err = Error(Code::kUnavailable,
                  "hypervisor exited before the guest was ready: " + std::get<1>(r).describe());
      break;
    default: err = Error(Code::kDeadlineExceeded, "guest did not report ready before the deadline");
  }
  std::string diag = (*vm)->diagnostics();
  (void)co_await (*vm)->stop();
  if (!diag.empty()) err = Error(err.code(), err.context() + "; " + diag, err.sysErrno());
  co_return std::move(err).withContext("boot machine " + id);
}

}  // namespace vessel::node
