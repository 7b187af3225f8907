#include "e2b/envd/signature.h"

#include <gtest/gtest.h>

namespace vessel::e2b::envd {
namespace {

// The e2b JS SDK 2.45.0 getSignature scheme, computed with node:crypto:
//   "v1_" + base64(sha256("/home/user/a.txt:read:user:tok")) without padding.
TEST(SignatureTest, MatchesTheSdksScheme) {
  EXPECT_EQ(fileSignature("/home/user/a.txt", "read", "user", "tok", std::nullopt),
            "v1_p0WqJQYCLtO6YX+e4h7VbpybRsdJbMbIw7clYpulIJk");
}

TEST(SignatureTest, ChecksTokenOperationAndExpiry) {
  SignedRequest r{"a.txt", "write", "user", "", 1000};
  r.signature = fileSignature(r.path, r.operation, r.user, "tok", r.expiration);
  EXPECT_TRUE(checkFileSignature(r, "tok", 999).ok());
  EXPECT_EQ(checkFileSignature(r, "tok", 1001).error().code(), Code::kUnauthenticated);
  EXPECT_FALSE(checkFileSignature(r, "other", 999).ok());
  SignedRequest read = r;
  read.operation = "read";
  EXPECT_FALSE(checkFileSignature(read, "tok", 999).ok());
  SignedRequest later = r;
  later.expiration = 2000;  // the expiration is signed: moving it breaks the signature
  EXPECT_FALSE(checkFileSignature(later, "tok", 999).ok());
  SignedRequest bogus = r;
  bogus.operation = "delete";
  EXPECT_FALSE(checkFileSignature(bogus, "tok", 999).ok());
}

TEST(SignatureTest, ParsesExpiration) {
  EXPECT_EQ(*parseExpiration("1700000000"), 1700000000);
  EXPECT_FALSE(parseExpiration("").ok());
  EXPECT_FALSE(parseExpiration("-1").ok());
  EXPECT_FALSE(parseExpiration("12x").ok());
  EXPECT_FALSE(parseExpiration("99999999999999999999").ok());
}

}  // namespace
}  // namespace vessel::e2b::envd
