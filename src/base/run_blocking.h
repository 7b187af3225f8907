#pragma once
// runBlocking: drives an io_context until one coroutine finishes and returns
// its result. For mains and tests that sit at the edge of the async world;
// never call it from inside a coroutine.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <optional>

namespace vessel {

template <typename T>
T runBlocking(boost::asio::io_context& io, boost::asio::awaitable<T> a) {
  std::optional<T> out;
  boost::asio::co_spawn(
      io, [&]() -> boost::asio::awaitable<void> { out.emplace(co_await std::move(a)); },
      boost::asio::detached);
  io.restart();
  while (!out) io.run_one_for(std::chrono::milliseconds(20));
  // Running out of work leaves an io_context "stopped"; leave it usable.
  io.restart();
  return std::move(*out);
}

}  // namespace vessel
