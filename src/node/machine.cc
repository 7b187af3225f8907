#include "node/machine.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "agentclient/handshake.h"
#include "base/log.h"

namespace vessel::node {

asio::awaitable<Result<Machine>> agentHandshake(hypervisor::Socket& channel) {
  VESSEL_CO_ASSIGN_OR_RETURN(agentclient::Handshake h, co_await agentclient::handshake(channel));
  Machine m;
  m.hello = std::move(h.hello);
  m.leftover = std::move(h.leftover);
  co_return m;
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
