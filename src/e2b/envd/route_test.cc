// Which sandbox an envd request is for, from its head: what an API replica
// forwards by (header, Host, or the signature of a signed /files URL).
#include "e2b/envd/route.h"

#include <gtest/gtest.h>

#include "e2b/envd/signature.h"

namespace vessel::e2b::envd {
namespace {

namespace http = boost::beast::http;

// A signature in a query: base64's '+' and '/' percent-encoded.
std::string enc(const std::string& sig) {
  std::string out;
  for (char c : sig) out += c == '+' ? "%2B" : c == '/' ? "%2F" : std::string(1, c);
  return out;
}

TEST(EnvdRouteTest, HeaderThenHostThenSignature) {
  auto tokens = AccessTokens::withKey(std::string(32, 'k'));
  int asked = 0;
  auto live = [&] {
    ++asked;
    return std::vector<std::string>{"sb-a", "sb-b"};
  };
  http::request_header<> h;
  h.method(http::verb::post);
  h.target("/process.Process/Start");
  h.set(http::field::host, "49983-sb-host.vessel.example:443");
  EXPECT_EQ(sandboxOfRequest(h, tokens, live), "sb-host");
  h.set("E2b-Sandbox-Id", "sb-header");
  EXPECT_EQ(sandboxOfRequest(h, tokens, live), "sb-header");
  h.erase("E2b-Sandbox-Id");
  h.set(http::field::host, "127.0.0.1:49983");
  EXPECT_EQ(sandboxOfRequest(h, tokens, live), std::nullopt);
  EXPECT_EQ(asked, 0);

  // A signed download URL names no sandbox: the one whose token signed it.
  std::string sig =
      fileSignature("/tmp/x", "read", "user", tokens.forSandbox("sb-b"), std::nullopt);
  h.method(http::verb::get);
  h.target("/files?path=%2Ftmp%2Fx&username=user&signature=" + enc(sig));
  EXPECT_EQ(sandboxOfRequest(h, tokens, live), "sb-b");
  // Signed for an upload, it is not a download's signature.
  h.method(http::verb::post);
  EXPECT_EQ(sandboxOfRequest(h, tokens, live), std::nullopt);
  // Expired, it is still that sandbox's (its node answers "expired").
  std::string old = fileSignature("/tmp/x", "read", "user", tokens.forSandbox("sb-a"), 1000);
  h.method(http::verb::get);
  h.target("/files?path=%2Ftmp%2Fx&username=user&signature=" + enc(old) +
           "&signature_expiration=1000");
  EXPECT_EQ(sandboxOfRequest(h, tokens, live), "sb-a");
  h.target("/files?path=%2Ftmp%2Fx&signature=v1_bogus");
  EXPECT_EQ(sandboxOfRequest(h, tokens, live), std::nullopt);
  h.target("/files?bogus=1&signature=x");
  EXPECT_EQ(sandboxOfRequest(h, tokens, live), std::nullopt);
}

}  // namespace
}  // namespace vessel::e2b::envd
