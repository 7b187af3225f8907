#include "cluster/node_tokens.h"

#include <gtest/gtest.h>

namespace vessel::cluster {
namespace {

TEST(NodeTokensTest, EachNodeGetsItsOwnLine) {
  auto t = NodeTokens::parse(
      "# the cluster's nodes\n"
      "node0 aaaaaaaaaaaaaaaa0\n"
      "\n"
      "  node1\t bbbbbbbbbbbbbbbb1  \n");
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_TRUE(t->perNode());
  EXPECT_EQ(t->size(), 2u);
  EXPECT_EQ(t->forNode("node0"), "aaaaaaaaaaaaaaaa0");
  EXPECT_EQ(t->forNode("node1"), "bbbbbbbbbbbbbbbb1");
  EXPECT_EQ(t->forNode("node2"), "");
  EXPECT_EQ(t->forNode(""), "");
}

TEST(NodeTokensTest, TheSharedTokenIsEveryNodes) {
  auto t = NodeTokens::shared("cccccccccccccccc");
  EXPECT_FALSE(t.perNode());
  EXPECT_EQ(t.forNode("any"), "cccccccccccccccc");
  EXPECT_TRUE(NodeTokens().empty());
}

TEST(NodeTokensTest, RefusesBadLinesNamingThem) {
  for (const char* bad : {"node0\n",                                   // no token
                          "node0 short\n",                             // too short
                          "no/de aaaaaaaaaaaaaaaa\n",                  // not an id
                          "n aaaaaaaaaaaaaaaa\nn bbbbbbbbbbbbbbbb\n",  // twice
                          "# only a comment\n", ""}) {
    auto t = NodeTokens::parse(bad);
    EXPECT_FALSE(t.ok()) << bad;
    if (!t.ok()) {
      EXPECT_EQ(t.error().code(), Code::kInvalidArgument);
    }
  }
  auto second = NodeTokens::parse("a aaaaaaaaaaaaaaaa\nb short\n");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message().find("line 2"), std::string::npos) << second.error().message();
  EXPECT_FALSE(NodeTokens::parse(std::string((1 << 20) + 1, '#')).ok());
}

TEST(NodeTokensTest, NewTokensDifferAndHashesAreNotTheToken) {
  auto a = newNodeToken(), b = newNodeToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_NE(*a, *b);
  EXPECT_TRUE(NodeTokens::parse("n " + *a).ok());
  EXPECT_NE(nodeTokenHash(*a), *a);
  EXPECT_EQ(nodeTokenHash(*a), nodeTokenHash(*a));
  EXPECT_NE(nodeTokenHash(*a), nodeTokenHash(*b));
  EXPECT_EQ(nodeTokenMetaKey("node0"), "node_token_sha256:node0");
}

}  // namespace
}  // namespace vessel::cluster
