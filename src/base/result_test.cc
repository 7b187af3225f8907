#include "base/result.h"

#include <gtest/gtest.h>

namespace vessel {
namespace {

Result<int> half(int x) {
  if (x % 2) return Error(Code::kInvalidArgument, "odd " + std::to_string(x));
  return x / 2;
}

Result<int> quarter(int x) {
  VESSEL_ASSIGN_OR_RETURN(int h, half(x));
  VESSEL_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

Status checkQuarter(int x) {
  VESSEL_TRY_CTX(quarter(x), "quarter of " + std::to_string(x));
  return okStatus();
}

TEST(ResultTest, ValueAndErrorPropagate) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.error().context(), "odd 3");
}

TEST(ResultTest, ContextIsPrepended) {
  auto s = checkQuarter(6);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "quarter of 6: odd 3");
  EXPECT_TRUE(checkQuarter(4).ok());
}

TEST(ResultTest, ErrnoMapsToCodeAndMessage) {
  Error e = Error::fromErrno("open /nope", ENOENT);
  EXPECT_EQ(e.code(), Code::kNotFound);
  EXPECT_EQ(e.sysErrno(), ENOENT);
  EXPECT_EQ(e.message(), "open /nope: No such file or directory");
  EXPECT_EQ(codeName(e.code()), "not_found");
}

}  // namespace
}  // namespace vessel
