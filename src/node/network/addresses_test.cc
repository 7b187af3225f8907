#include "node/network/addresses.h"

#include <gtest/gtest.h>

#include <set>

namespace vessel::node::network {
namespace {

TEST(SlotAddressesTest, EachSlotOwnsOneTransitSlash30) {
  NetworkLayout l;
  auto a = slotAddresses(l, 3, GuestLink{});
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_EQ(a->guest_if, "tap0");
  EXPECT_EQ(a->transit_if, "transit0");
  EXPECT_EQ(a->gateway_side_if, "vsh3");
  EXPECT_EQ(a->gateway_address, "10.200.0.13");
  EXPECT_EQ(a->slot_address, "10.200.0.14");
  auto v = slotAddresses(l, 0, GuestLink{GuestLink::Kind::kVeth, "peer", "eth0"});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->guest_if, "guest0");
  EXPECT_EQ(v->gateway_address, "10.200.0.1");
  EXPECT_EQ(v->slot_address, "10.200.0.2");
}

TEST(SlotAddressesTest, TheLayoutsBaseAndPrefixAreUsed) {
  NetworkLayout l;
  l.prefix = "vq";
  l.transit_base = "10.77.0.0";
  auto a = slotAddresses(l, 64, GuestLink{});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->gateway_side_if, "vqh64");
  EXPECT_EQ(a->gateway_address, "10.77.1.1");  // 64 * 4 = 256: the next /24
  EXPECT_EQ(a->slot_address, "10.77.1.2");
  EXPECT_EQ(slotNetnsName(l, 64), "vq-64");
}

TEST(SlotAddressesTest, TheLastSlotEndsTheSlash16AndNoneGoesPastIt) {
  NetworkLayout l;
  auto last = slotAddresses(l, kMaxSlots - 1, GuestLink{});
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->gateway_address, "10.200.255.253");
  EXPECT_EQ(last->slot_address, "10.200.255.254");
  auto past = slotAddresses(l, kMaxSlots, GuestLink{});
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code(), Code::kResourceExhausted);
  EXPECT_FALSE(transitAddress("10.200.0.0", kMaxSlots, 1).ok());
  EXPECT_FALSE(transitAddress("10.200.0.0", 0, 4).ok()) << "host 4 is the next slot's .0";
}

TEST(SlotAddressesTest, ABadBaseIsRefused) {
  for (const char* base :
       {"", "10.200.0", "10.200.0.0/16", "fd00::", "10.200.0.256", " 10.0.0.0"}) {
    auto r = transitAddress(base, 0, 1);
    EXPECT_FALSE(r.ok()) << "'" << base << "'";
    if (!r.ok()) {
      EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << base;
    }
  }
  NetworkLayout l;
  l.transit_base = "nope";
  EXPECT_FALSE(slotAddresses(l, 0, GuestLink{}).ok());
}

TEST(SlotAddressesTest, NoTwoSlotsShareAnAddress) {
  // The gateway tells sandboxes apart by the slot side address alone: a
  // collision would hand one sandbox another's policy and credentials.
  NetworkLayout l;
  std::set<std::string> seen;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    auto a = slotAddresses(l, i, GuestLink{});
    ASSERT_TRUE(a.ok()) << i;
    EXPECT_TRUE(seen.insert(a->slot_address).second) << i;
    EXPECT_TRUE(seen.insert(a->gateway_address).second) << i;
  }
  EXPECT_EQ(seen.size(), 2u * kMaxSlots);
}

TEST(SlotAddressesTest, SlotIndexOfReadsOnlyThisPrefixsSlotNamespaces) {
  struct Row {
    const char* name;
    std::optional<uint32_t> index;
  };
  const Row rows[] = {
      {"vs-0", 0u},
      {"vs-7", 7u},
      {"vs-16383", 16383u},
      {"vs-16384", std::nullopt},  // past kMaxSlots
      {"vs-99999", std::nullopt},
      {"vs-123456", std::nullopt},  // more than five digits
      {"vs-gw", std::nullopt},      // the private gateway namespace
      {"vs-", std::nullopt},
      {"vs", std::nullopt},
      {"vs--1", std::nullopt},
      {"vs-+1", std::nullopt},
      {"vs- 1", std::nullopt},
      {"vs-1a", std::nullopt},
      {"vsh1", std::nullopt},
      {"vsx-1", std::nullopt},  // another prefix that starts with this one
      {"vt-1", std::nullopt},
      {"xvs-1", std::nullopt},
  };
  for (const Row& r : rows) EXPECT_EQ(slotIndexOf("vs", r.name), r.index) << r.name;
}

}  // namespace
}  // namespace vessel::node::network
