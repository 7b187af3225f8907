#pragma once
// A host-side deadline on calls into a guest. The agent protocol has no
// per-call timeout of its own (a guest may legitimately take long to run a
// command), but the lifecycle's own calls (identity, guest network) must
// end: a guest that stops answering fails its sandbox instead of holding
// it, its quota and its operation forever.
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "agentclient/agent_client.h"

namespace vessel::node {

namespace asio = boost::asio;

// Runs `call`, made through `agent`; if it has not finished within `limit`
// the channel is closed, which fails every call in flight on it, and the
// result is kDeadlineExceeded naming `what`. T is Status or a Result.
template <typename T>
asio::awaitable<T> withGuestDeadline(std::shared_ptr<agentclient::AgentClient> agent,
                                     std::chrono::milliseconds limit, std::string what,
                                     asio::awaitable<T> call) {
  auto timer = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor, limit);
  auto expired = std::make_shared<bool>(false);
  timer->async_wait([agent, expired](boost::system::error_code ec) {
    if (ec) return;
    *expired = true;
    agent->close();
  });
  T r = co_await std::move(call);
  timer->cancel();
  if (*expired && !r.ok())
    co_return Error(Code::kDeadlineExceeded, what + ": the guest did not answer within " +
                                                 std::to_string(limit.count()) + " ms");
  co_return r;
}

}  // namespace vessel::node
