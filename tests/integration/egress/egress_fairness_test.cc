// One sandbox cannot take egress away from the others: a root guest holds
// tens of thousands of half-open TLS connections and floods the gateway's
// DNS while another guest's allowed HTTPS request still succeeds. The
// flooding guest is held back by its slot's nftables limits and the
// gateway's per-sandbox budgets (docs/gateway.md, "Fair share").
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "tests/integration/egress/world.h"

namespace vessel::egress_test {
namespace {

using namespace std::chrono_literals;

TEST(EgressFairnessTest, FloodingGuestDoesNotStarveAnother) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  auto w = EgressWorld::create();
  ASSERT_TRUE(w.ok()) << w.error().message();
  auto flooder = (*w)->addGuest("sb-flood", allowlist(1, {"a.test", "*.a.test"}));
  ASSERT_TRUE(flooder.ok()) << flooder.error().message();
  auto victim = (*w)->addGuest("sb-victim", allowlist(1, {"a.test"}));
  ASSERT_TRUE(victim.ok()) << victim.error().message();
  int64_t overloaded = (*w)->counter("tcp_deny_overloaded");
  int64_t dns_overloaded = (*w)->counter("dns_deny_overloaded");
  ASSERT_GE(overloaded, 0);

  std::string flag = (*w)->dir() + "/flood.flag";
  std::string flood_out;
  std::thread flood([&] {
    flood_out = (*w)->guestRun(**flooder,
                               {"python3", VESSEL_EGRESS_DIR "/flood_tool.py", "30000", "15", flag},
                               std::chrono::seconds(90));
  });
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join{flood};
  // The flood is on once every connection has been started.
  for (int i = 0; i < 600 && ::access(flag.c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(50ms);
  if (::access(flag.c_str(), F_OK) != 0) {
    flood.join();
    FAIL() << "the flood never started: " << flood_out;
  }

  // The other sandbox's allowed HTTPS request succeeds meanwhile.
  std::string ok = (*w)->curl(**victim, {"--cacert", (*w)->testCa(), "-m", "5", "https://a.test/"});
  EXPECT_NE(ok.find("hello from a.test"), std::string::npos) << ok;
  // And the flooder ran into its budgets (the gateway's verdicts say so).
  EXPECT_TRUE((*w)->waitForCounter("tcp_deny_overloaded", overloaded)) << flood_out;
  EXPECT_TRUE((*w)->waitForCounter("dns_deny_overloaded", dns_overloaded)) << flood_out;
}

}  // namespace
}  // namespace vessel::egress_test
