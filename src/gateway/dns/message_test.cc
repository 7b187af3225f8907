#include "gateway/dns/message.h"

#include <gtest/gtest.h>

namespace vessel::gateway::dns {
namespace {

namespace ip = boost::asio::ip;

TEST(DnsMessageTest, QueryRoundTrip) {
  std::string q = buildQuery(0x1234, "a.test", kTypeA);
  auto parsed = parseQuery(q);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  EXPECT_EQ(parsed->id, 0x1234);
  EXPECT_EQ(parsed->name, "a.test");
  EXPECT_EQ(parsed->qtype, kTypeA);
  EXPECT_TRUE(parsed->recursion_desired);
}

TEST(DnsMessageTest, ResponseRoundTrip) {
  Question q{.id = 7, .recursion_desired = true, .name = "a.test", .qtype = kTypeA, .qclass = 1};
  std::string resp = buildResponse(q, Rcode::kNoError, {{ip::make_address("198.51.100.10"), 60}});
  auto a = parseResponse(resp, 7, "a.test", kTypeA);
  ASSERT_TRUE(a.ok()) << a.error().message();
  ASSERT_EQ(a->records.size(), 1u);
  EXPECT_EQ(a->records[0].address.to_string(), "198.51.100.10");
  EXPECT_EQ(a->records[0].ttl, 60u);
  EXPECT_FALSE(parseResponse(resp, 8, "a.test", kTypeA).ok());
  EXPECT_FALSE(parseResponse(resp, 7, "x.test", kTypeA).ok());
}

TEST(DnsMessageTest, OnlyTheCnameChainCounts) {
  // Hand-built: question a.test A; answers: a.test CNAME b.test (compressed),
  // other.test A 203.0.113.66 (unrelated), b.test A 198.51.100.10.
  std::string p = buildQuery(9, "a.test", kTypeA);
  p[2] = '\x81';
  p[3] = '\x80';
  p[7] = 3;  // ancount
  auto rr = [&](std::string owner, uint16_t type, std::string rdata) {
    p += owner;
    p += std::string{static_cast<char>(type >> 8), static_cast<char>(type & 0xff), 0, 1};
    p += std::string("\0\0\0\x3c", 4);
    p += std::string{static_cast<char>(rdata.size() >> 8), static_cast<char>(rdata.size())};
    p += rdata;
  };
  rr(std::string("\xc0\x0c", 2), kTypeCname,
     std::string("\x01"
                 "b\xc0\x0e",
                 4));
  rr(std::string("\x05other\x04test\x00", 12), kTypeA, std::string("\xcb\x00\x71\x42", 4));
  rr(std::string("\x01"
                 "b\x04test\x00",
                 8),
     kTypeA, std::string("\xc6\x33\x64\x0a", 4));
  auto a = parseResponse(p, 9, "a.test", kTypeA);
  ASSERT_TRUE(a.ok()) << a.error().message();
  ASSERT_EQ(a->records.size(), 1u);
  EXPECT_EQ(a->records[0].address.to_string(), "198.51.100.10");
}

TEST(DnsMessageTest, HostileQueriesAreErrors) {
  std::string q = buildQuery(1, "a.test", kTypeA);
  EXPECT_FALSE(parseQuery(q.substr(0, 11)).ok());
  EXPECT_FALSE(parseQuery(q.substr(0, q.size() - 1)).ok());
  std::string resp = q;
  resp[2] |= '\x80';
  EXPECT_FALSE(parseQuery(resp).ok());
  std::string two = q;
  two[5] = 2;
  EXPECT_FALSE(parseQuery(two).ok());
  // A compression pointer loop in a response.
  std::string loop = q.substr(0, 12) + std::string("\xc0\x0c\x00\x01\x00\x01", 6);
  loop[2] = '\x81';
  EXPECT_FALSE(parseResponse(loop, 1, "a.test", kTypeA).ok());
}

}  // namespace
}  // namespace vessel::gateway::dns
