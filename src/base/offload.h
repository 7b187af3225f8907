#pragma once
// Runs a blocking function on a thread pool and resumes the awaiting
// coroutine on its own executor with the result: for work such as a dozen
// `ip`/`nft` runs that an io thread serving API requests must not wait for.
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <type_traits>
#include <utility>

namespace vessel {

// `fn` runs on `pool`; its result comes back on the caller's executor. If
// the pool is stopped before `fn` runs, the coroutine is destroyed without
// resuming (as with any abandoned asio operation).
template <class F>
boost::asio::awaitable<std::invoke_result_t<F>> offload(boost::asio::thread_pool& pool, F fn) {
  using T = std::invoke_result_t<F>;
  auto home = co_await boost::asio::this_coro::executor;
  co_return co_await boost::asio::async_initiate<decltype(boost::asio::use_awaitable), void(T)>(
      [&pool, home](auto handler, F f) {
        boost::asio::post(pool, [home, f = std::move(f), h = std::move(handler)]() mutable {
          T r = f();
          boost::asio::post(
              home, [r = std::move(r), h = std::move(h)]() mutable { std::move(h)(std::move(r)); });
        });
      },
      boost::asio::use_awaitable, std::move(fn));
}

}  // namespace vessel
