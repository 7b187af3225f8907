#include "client/sse_parser.h"

#include <gtest/gtest.h>

#include <vector>

namespace vessel::client {
namespace {

std::vector<SseEvent> all(SseParser& p) {
  std::vector<SseEvent> out;
  while (auto e = p.next()) out.push_back(std::move(*e));
  return out;
}

TEST(SseParser, EventsFieldsAndComments) {
  SseParser p;
  ASSERT_TRUE(p.feed(": keepalive\n\nid: 7\nevent: operation.done\ndata: {\"a\":1}\n\n"
                     "data: one\ndata:two\n\n")
                  .ok());
  auto ev = all(p);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].id, "7");
  EXPECT_EQ(ev[0].type, "operation.done");
  EXPECT_EQ(ev[0].data, "{\"a\":1}");
  // The id carries over; the type does not; data lines join with LF and
  // only one leading space is removed.
  EXPECT_EQ(ev[1].id, "7");
  EXPECT_EQ(ev[1].type, "message");
  EXPECT_EQ(ev[1].data, "one\ntwo");
  EXPECT_EQ(p.lastEventId(), "7");
}

TEST(SseParser, AnySplitAndAnyLineEnding) {
  const std::string text = "id: 1\r\nevent: stdout\r\ndata:  x\r\n\r\nid: 2\rdata: y\r\r";
  for (size_t step = 1; step <= text.size(); ++step) {
    SseParser p;
    for (size_t i = 0; i < text.size(); i += step)
      ASSERT_TRUE(p.feed(std::string_view(text).substr(i, step)).ok());
    auto ev = all(p);
    ASSERT_EQ(ev.size(), 2u) << "step " << step;
    EXPECT_EQ(ev[0].type, "stdout");
    EXPECT_EQ(ev[0].data, " x");
    EXPECT_EQ(ev[1].id, "2");
    EXPECT_EQ(ev[1].data, "y");
  }
}

TEST(SseParser, IncompleteEventIsNotDispatched) {
  SseParser p;
  ASSERT_TRUE(p.feed("event: a\n\nevent: b\ndata: half").ok());
  EXPECT_FALSE(p.next().has_value());  // a block without data is no event
}

TEST(SseParser, OversizedEventIsAnError) {
  SseParser p(16);
  EXPECT_FALSE(p.feed("data: " + std::string(64, 'x')).ok());
  EXPECT_FALSE(p.feed("\n\n").ok());  // and it stays failed
  SseParser q(16);
  EXPECT_FALSE(q.feed("data: 0123456789\ndata: 0123456789\n\n").ok());
}

}  // namespace
}  // namespace vessel::client
