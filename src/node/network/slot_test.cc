#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>

#include "base/fd.h"
#include "node/network/rulesets.h"
#include "node/network/slot_pool.h"
#include "os/command.h"

namespace vessel::node::network {
namespace {

class SlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    std::string id = std::to_string(::getpid());
    auto gw = os::Netns::create("vt-slot-gw-" + id);
    ASSERT_TRUE(gw.ok()) << gw.error().message();
    gw_ = std::move(*gw);
    layout_.gateway_netns = gw_.name();
    layout_.prefix = "vt" + id.substr(id.size() > 4 ? id.size() - 4 : 0);
  }
  bool netnsExists(const std::string& name) { return os::Netns::exists(name); }
  std::string run(const os::Netns& ns, std::vector<std::string> argv) {
    auto r = os::runCommand(ns.wrap(std::move(argv)));
    return r.ok() ? r->out : "ERROR " + r.error().message();
  }
  os::Netns gw_;
  NetworkLayout layout_;
};

TEST_F(SlotTest, PoolMakesSlotsAndCleansUp) {
  std::string first_ns;
  {
    auto pool = SlotPool::create(layout_, 2);
    ASSERT_TRUE(pool.ok()) << pool.error().message();
    EXPECT_EQ((*pool)->ready(), 2u);
    auto slot = (*pool)->acquire();
    ASSERT_TRUE(slot.ok()) << slot.error().message();
    first_ns = (*slot)->netns().name();
    EXPECT_GE((*slot)->tapFd(), 0);
    EXPECT_NE(run((*slot)->netns(), {"nft", "list", "ruleset"}).find("vessel_slot"),
              std::string::npos);
    EXPECT_NE(run(gw_, {"nft", "list", "set", "ip", gatewayTableName(layout_), "slot_sources"})
                  .find((*slot)->sourceAddress()),
              std::string::npos);
    (*pool)->release(std::move(*slot));
    EXPECT_FALSE(netnsExists(first_ns));
    EXPECT_TRUE((*pool)->refill().ok());
  }
  EXPECT_EQ(run(gw_, {"nft", "list", "tables"}), "");
  EXPECT_EQ(run(gw_, {"ip", "-o", "link", "show", "type", "veth"}), "");
}

TEST_F(SlotTest, RuleFailureLeavesNoSlot) {
  auto pool = SlotPool::create(layout_, 0);
  ASSERT_TRUE(pool.ok()) << pool.error().message();
  NetworkLayout bad = layout_;
  bad.guest_mac = "not-a-mac";
  auto slot = Slot::create(bad, 7);
  ASSERT_FALSE(slot.ok());
  EXPECT_NE(slot.error().message().find("nftables"), std::string::npos);
  EXPECT_FALSE(netnsExists(bad.prefix + "-7"));
  EXPECT_EQ(run(gw_, {"ip", "-o", "link", "show", "type", "veth"}), "");
}

// Runs `work` on a fresh io thread beside another client of it, a tick
// every millisecond; returns how many ticks happened before `work` ended.
// A slot is made or torn down by about a dozen `ip`/`nft` runs: done
// inline, no tick would happen meanwhile.
int ticksDuring(const std::function<boost::asio::awaitable<void>()>& work) {
  boost::asio::io_context io;
  int ticks_before = -1, ticks = 0;
  bool done = false;
  boost::asio::steady_timer t(io);
  std::function<void()> tick = [&] {
    t.expires_after(std::chrono::milliseconds(1));
    t.async_wait([&](boost::system::error_code ec) {
      if (ec || done) return;
      ++ticks;
      tick();
    });
  };
  tick();
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        co_await work();
        ticks_before = ticks;
        done = true;
        t.cancel();
      },
      boost::asio::detached);
  io.run();
  return ticks_before;
}

TEST_F(SlotTest, AcquireAsyncMakesTheSlotWhileTheIoThreadServesOthers) {
  auto pool = SlotPool::create(layout_, 0);
  ASSERT_TRUE(pool.ok()) << pool.error().message();
  Result<std::unique_ptr<Slot>> slot = Error(Code::kInternal, "not run");
  int ticks = ticksDuring(
      [&]() -> boost::asio::awaitable<void> { slot = co_await (*pool)->acquireAsync(); });
  ASSERT_TRUE(slot.ok()) << slot.error().message();
  EXPECT_GT(ticks, 0) << "the io thread was blocked while the slot was made";
  EXPECT_TRUE(netnsExists((*slot)->netns().name()));
  EXPECT_GE((*slot)->tapFd(), 0);
  std::string name = (*slot)->netns().name();
  (*pool)->release(std::move(*slot));
  EXPECT_FALSE(netnsExists(name));
}

TEST_F(SlotTest, ReleaseAsyncTearsDownWhileTheIoThreadServesOthers) {
  auto pool = SlotPool::create(layout_, 0);
  ASSERT_TRUE(pool.ok()) << pool.error().message();
  auto slot = (*pool)->acquire();
  ASSERT_TRUE(slot.ok()) << slot.error().message();
  std::string name = (*slot)->netns().name(), source = (*slot)->sourceAddress();
  uint32_t index = (*slot)->index();
  EXPECT_EQ((*pool)->attached(), 1u);
  int ticks = ticksDuring(
      [&]() -> boost::asio::awaitable<void> { co_await (*pool)->releaseAsync(std::move(*slot)); });
  EXPECT_GT(ticks, 0) << "the io thread was blocked while the slot was torn down";
  // All of it is gone once the release completes, and its index is free.
  EXPECT_FALSE(netnsExists(name));
  EXPECT_EQ(run(gw_, {"nft", "list", "set", "ip", gatewayTableName(layout_), "slot_sources"})
                .find(source),
            std::string::npos);
  EXPECT_EQ((*pool)->attached(), 0u);
  auto next = (*pool)->acquire();  // none ready: made with the lowest free index
  ASSERT_TRUE(next.ok()) << next.error().message();
  EXPECT_EQ((*next)->index(), index);
  (*pool)->release(std::move(*next));
}

TEST_F(SlotTest, HandedOverSlotIsAdoptedByTheNextPoolAndTheRestRemoved) {
  uint32_t kept = 0;
  std::string kept_ns, kept_source;
  Fd vm_tap;  // plays the VM: it holds the tap across the "restart"
  {
    auto pool = SlotPool::create(layout_, 2);
    ASSERT_TRUE(pool.ok()) << pool.error().message();
    auto slot = (*pool)->acquire();
    ASSERT_TRUE(slot.ok()) << slot.error().message();
    kept = (*slot)->index();
    kept_ns = (*slot)->netns().name();
    kept_source = (*slot)->sourceAddress();
    vm_tap = Fd(::dup((*slot)->tapFd()));
    (*pool)->handOver(std::move(*slot));
    EXPECT_EQ((*pool)->handedOver(), 1u);
  }
  // The handed-over slot and the gateway table stay; the ready ones went.
  EXPECT_TRUE(netnsExists(kept_ns));
  EXPECT_NE(run(gw_, {"nft", "list", "tables"}).find(gatewayTableName(layout_)), std::string::npos);

  // A leftover the next run will not adopt (its VM died).
  auto stale = Slot::create(layout_, 9);
  ASSERT_TRUE(stale.ok()) << stale.error().message();
  (*stale)->handOver();
  stale->reset();

  auto pool = SlotPool::create(layout_, 1);
  ASSERT_TRUE(pool.ok()) << pool.error().message();
  EXPECT_EQ((*pool)->leftovers(), 2u);
  // The table was replaced, not added to: one copy of each rule, and no
  // element until the slot is adopted.
  std::string table = run(gw_, {"nft", "list", "table", "ip", gatewayTableName(layout_)});
  EXPECT_EQ(table.find("@slot_sources"), table.rfind("@slot_sources")) << table;
  EXPECT_EQ(table.find(kept_source), std::string::npos) << table;
  auto ready = (*pool)->acquire();
  ASSERT_TRUE(ready.ok());
  EXPECT_NE((*ready)->index(), kept) << "a new slot never takes a leftover's index";
  EXPECT_NE((*ready)->index(), 9u);

  EXPECT_FALSE((*pool)->adopt(kept + 100).ok()) << "only leftovers can be adopted";
  auto adopted = (*pool)->adopt(kept);
  ASSERT_TRUE(adopted.ok()) << adopted.error().message();
  EXPECT_EQ((*adopted)->sourceAddress(), kept_source);
  EXPECT_NE(run(gw_, {"nft", "list", "set", "ip", gatewayTableName(layout_), "slot_sources"})
                .find(kept_source),
            std::string::npos);
  (*pool)->dropLeftovers();
  EXPECT_EQ((*pool)->leftovers(), 0u);
  EXPECT_FALSE(netnsExists(layout_.prefix + "-9"));
  EXPECT_TRUE(netnsExists(kept_ns));
  (*pool)->release(std::move(*adopted));
  (*pool)->release(std::move(*ready));
  EXPECT_FALSE(netnsExists(kept_ns));
}

TEST_F(SlotTest, AnIncompleteLeftoverIsRefusedAndRemoved) {
  uint32_t index = 0;
  std::string ns;
  Fd vm_tap;
  {
    auto pool = SlotPool::create(layout_, 0);
    ASSERT_TRUE(pool.ok()) << pool.error().message();
    auto slot = (*pool)->acquire();
    ASSERT_TRUE(slot.ok()) << slot.error().message();
    index = (*slot)->index();
    ns = (*slot)->netns().name();
    vm_tap = Fd(::dup((*slot)->tapFd()));
    // Its rules are gone: taken over, the guest would be unpoliced.
    EXPECT_EQ(run((*slot)->netns(), {"nft", "delete", "table", "ip", "vessel_slot"}), "");
    (*pool)->handOver(std::move(*slot));
  }
  auto pool = SlotPool::create(layout_, 0);
  ASSERT_TRUE(pool.ok()) << pool.error().message();
  auto adopted = (*pool)->adopt(index);
  ASSERT_FALSE(adopted.ok());
  EXPECT_NE(adopted.error().message().find("slot rules"), std::string::npos)
      << adopted.error().message();
  EXPECT_FALSE(netnsExists(ns));
  EXPECT_EQ(run(gw_, {"ip", "-o", "link", "show", "type", "veth"}), "");
}

}  // namespace
}  // namespace vessel::node::network
