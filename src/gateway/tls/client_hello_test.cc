#include "gateway/tls/client_hello.h"

#include <gtest/gtest.h>

#include "gateway/tls/hello_builder.h"

namespace vessel::gateway::tls {
namespace {

using State = ClientHelloParser::State;

ClientHelloParser parseAll(const std::string& bytes, size_t segment = 0) {
  ClientHelloParser p;
  if (segment == 0) {
    p.feed(bytes);
    return p;
  }
  for (size_t off = 0; off < bytes.size() && p.state() == State::kNeedMore; off += segment) {
    p.feed(std::string_view(bytes).substr(off, segment));
  }
  return p;
}

TEST(ClientHelloTest, SingleSni) {
  auto p = parseAll(buildClientHello({.server_names = {"a.test"}, .alpn = {"http/1.1"}}));
  ASSERT_EQ(p.state(), State::kDone) << p.error();
  ASSERT_EQ(p.hello().server_names.size(), 1u);
  EXPECT_EQ(p.hello().server_names[0], "a.test");
  EXPECT_EQ(p.hello().alpn, std::vector<std::string>{"http/1.1"});
  EXPECT_FALSE(p.hello().has_ech);
}

TEST(ClientHelloTest, SniAcrossRecordsAndSegments) {
  std::string bytes = buildClientHello({.server_names = {"split.a.test"}, .record_size = 7});
  for (size_t seg : {1u, 3u, 5u, 64u}) {
    auto p = parseAll(bytes, seg);
    ASSERT_EQ(p.state(), State::kDone) << seg << ": " << p.error();
    EXPECT_EQ(p.hello().server_names.at(0), "split.a.test");
  }
}

TEST(ClientHelloTest, IncompleteNeedsMore) {
  std::string bytes = buildClientHello({.server_names = {"a.test"}});
  ClientHelloParser p;
  EXPECT_EQ(p.feed(std::string_view(bytes).substr(0, bytes.size() - 1)), State::kNeedMore);
  EXPECT_EQ(p.feed(std::string_view(bytes).substr(bytes.size() - 1)), State::kDone);
}

TEST(ClientHelloTest, OversizedHellosAreParsed) {
  // > 4 KiB and > 16 KiB (spans two records): threat 21.
  for (size_t pad : {5000u, 20000u}) {
    auto p = parseAll(buildClientHello({.server_names = {"big.test"}, .padding = pad}), 1400);
    ASSERT_EQ(p.state(), State::kDone) << pad << ": " << p.error();
    EXPECT_EQ(p.hello().server_names.at(0), "big.test");
  }
}

TEST(ClientHelloTest, OverCapIsRefused) {
  auto p = parseAll(buildClientHello({.server_names = {"a.test"}, .padding = kMaxHelloBytes}));
  EXPECT_EQ(p.state(), State::kError);
}

TEST(ClientHelloTest, ReportsMultipleNamesEchAndEarlyData) {
  auto p = parseAll(
      buildClientHello({.server_names = {"a.test", "x.test"}, .ech = true, .early_data = true}));
  ASSERT_EQ(p.state(), State::kDone) << p.error();
  EXPECT_EQ(p.hello().server_names.size(), 2u);
  EXPECT_TRUE(p.hello().has_ech);
  EXPECT_TRUE(p.hello().has_early_data);
}

TEST(ClientHelloTest, NoServerName) {
  auto p = parseAll(buildClientHello({}));
  ASSERT_EQ(p.state(), State::kDone);
  EXPECT_FALSE(p.hello().has_server_name_ext);
  EXPECT_TRUE(p.hello().server_names.empty());
}

TEST(ClientHelloTest, EarlyDataRecordAfterHelloIsNotParsed) {
  std::string bytes = buildClientHello({.server_names = {"a.test"}, .early_data = true});
  bytes += std::string("\x17\x03\x03\x00\x05hello", 10);
  auto p = parseAll(bytes);
  EXPECT_EQ(p.state(), State::kDone) << p.error();
}

TEST(ClientHelloTest, GarbageFailsOnFirstBytes) {
  EXPECT_EQ(parseAll("GET / HTTP/1.1\r\n").state(), State::kError);
  EXPECT_EQ(parseAll(std::string("\x16\x99", 2)).state(), State::kError);
  // SSLv2-style hello: first byte has the high bit set.
  EXPECT_EQ(parseAll(std::string("\x80\x2e\x01\x00\x02", 5)).state(), State::kError);
}

TEST(ClientHelloTest, MalformedLengthsAreErrors) {
  std::string bytes = buildClientHello({.server_names = {"a.test"}});
  // Corrupt the server_name list length (it follows the extensions length).
  std::string bad = bytes;
  size_t at = bad.find("a.test");
  bad[at - 4] = '\x7f';
  EXPECT_EQ(parseAll(bad).state(), State::kError);
  // A non-hello handshake message.
  std::string notHello = bytes;
  notHello[5] = 2;
  EXPECT_EQ(parseAll(notHello).state(), State::kError);
  // Empty handshake record.
  EXPECT_EQ(parseAll(std::string("\x16\x03\x01\x00\x00", 5)).state(), State::kError);
}

TEST(ClientHelloTest, EveryTruncationIsNeedMoreOrError) {
  std::string bytes = buildClientHello({.server_names = {"a.test"}, .alpn = {"h2"}});
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto p = parseAll(bytes.substr(0, n));
    EXPECT_EQ(p.state(), State::kNeedMore) << n;
  }
}

TEST(ClientHelloTest, EchDraftCodePointsCountAsEch) {
  for (uint16_t code : {0xfe0d, 0xffce, 0xff02, 0xfe08, 0xfe0a, 0xfe0c, 0xfd00}) {
    ClientHelloParser p;
    ASSERT_EQ(p.feed(buildClientHello({.server_names = {"a.test"}, .ech = true, .ech_code = code})),
              ClientHelloParser::State::kDone);
    EXPECT_TRUE(p.hello().has_ech) << std::hex << code;
  }
}

}  // namespace
}  // namespace vessel::gateway::tls
