#pragma once
// Waiting for a child without blocking the io thread: the child's pidfd
// becomes readable when it exits (pidfd_open(2)), so the wait is an Asio
// read-readiness wait on it, raced against a timer.
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/child_process.h"

namespace vessel {

// The child's exit status once it has exited, or kDeadlineExceeded after
// `limit` (the child keeps running; the caller decides what to do).
inline boost::asio::awaitable<Result<ExitStatus>> waitAsync(ChildProcess& child,
                                                            std::chrono::milliseconds limit) {
  namespace asio = boost::asio;
  using namespace asio::experimental::awaitable_operators;
  if (auto st = child.tryWait()) co_return *st;
  auto ex = co_await asio::this_coro::executor;
  int fd = ::dup(child.pidfd());
  if (fd < 0) co_return Error::fromErrno("dup pidfd");
  asio::posix::stream_descriptor pidfd(ex, fd);
  asio::steady_timer timer(ex, limit);
  co_await (pidfd.async_wait(asio::posix::stream_descriptor::wait_read,
                             asio::as_tuple(asio::use_awaitable)) ||
            timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (auto st = child.tryWait()) co_return *st;
  co_return Error(Code::kDeadlineExceeded, "child " + std::to_string(child.pid()) +
                                               " still running after " +
                                               std::to_string(limit.count()) + " ms");
}

}  // namespace vessel
