// http::RenderThread: the work runs off the io thread, and the io thread
// serves other work meanwhile; the caller resumes on its own executor.
#include "http/render_thread.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>

namespace vessel::http {
namespace {

namespace asio = boost::asio;

TEST(RenderThreadTest, RendersOffTheIoThreadWhichServesOthersMeanwhile) {
  asio::io_context io;
  RenderThread render;
  std::promise<void> served;
  auto seen = served.get_future();
  std::thread::id io_thread = std::this_thread::get_id(), render_thread, resumed_on;
  std::optional<std::string> body;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        // The render waits for something only the io thread does (answering
        // another client): done inline, it could never see it.
        auto make = [&] {
          render_thread = std::this_thread::get_id();
          bool other_served = seen.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
          return std::string(other_served ? "{\"entries\":[]}" : "io thread was blocked");
        };
        body = co_await render.run(std::move(make));
        resumed_on = std::this_thread::get_id();
      },
      asio::detached);
  asio::post(io, [&] { served.set_value(); });
  io.run();
  ASSERT_TRUE(body.has_value());
  EXPECT_EQ(*body, "{\"entries\":[]}");
  EXPECT_NE(render_thread, io_thread);
  EXPECT_EQ(resumed_on, io_thread);
}

}  // namespace
}  // namespace vessel::http
