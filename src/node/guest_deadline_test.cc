// The host-side deadline on calls into a guest, against the real agent run
// on the host: an agent that stops answering (SIGSTOP, as a guest whose
// PID 1 stalls) fails the call at the deadline instead of holding it, and
// supervisors waiting on the channel learn that it closed.
#include "node/guest_deadline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "agentclient/testing/agent_harness.h"

namespace vessel::node {
namespace {

using namespace std::chrono_literals;
using agentclient::testing::runFor;

TEST(GuestDeadlineTest, AStalledAgentFailsTheCallAtTheDeadline) {
  asio::io_context io;
  auto h = agentclient::testing::HostAgent::start(io, VESSEL_AGENT_BINARY);
  ASSERT_TRUE(h.ok()) << h.error().message();
  auto c = (*h)->client();
  // Answered in time while the agent runs.
  auto ok = runFor(io, withGuestDeadline(c, 5000ms, "ping", c->ping()), 10s);
  ASSERT_TRUE(ok.ok()) << ok.error().message();

  bool closed = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await c->waitClosed();
        closed = true;
      },
      asio::detached);
  ASSERT_EQ((*h)->process().signal(SIGSTOP).ok(), true);
  auto st =
      runFor(io, withGuestDeadline(c, 300ms, "identity of sb-test", c->setHostname("x")), 10s);
  (void)(*h)->process().signal(SIGCONT);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Code::kDeadlineExceeded);
  EXPECT_THAT(st.error().message(), ::testing::HasSubstr("did not answer within 300 ms"));
  // The channel is closed: every later call fails at once, and a waiting
  // supervisor has been woken.
  for (int i = 0; i < 50 && !closed; ++i) io.run_one_for(20ms);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(c->failure().has_value());
}

}  // namespace
}  // namespace vessel::node
