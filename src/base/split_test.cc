#include "base/split.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vessel {
namespace {

using ::testing::ElementsAre;

TEST(SplitTest, KeepsEveryFieldEmptyOnesIncluded) {
  EXPECT_THAT(splitView("root:x:0:0::/root:/bin/sh", ':'),
              ElementsAre("root", "x", "0", "0", "", "/root", "/bin/sh"));
  EXPECT_THAT(splitView("a\nb\n", '\n'), ElementsAre("a", "b", ""));
  EXPECT_THAT(splitView("", ':'), ElementsAre(""));
  EXPECT_THAT(splitView(":", ':'), ElementsAre("", ""));
}

}  // namespace
}  // namespace vessel
