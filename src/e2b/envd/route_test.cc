// Which sandbox an envd request is for, from its head: what an API replica
// forwards by (header or Host; a signed /files URL names its sandbox too).
#include "e2b/envd/route.h"

#include <gtest/gtest.h>

namespace vessel::e2b::envd {
namespace {

namespace http = boost::beast::http;

TEST(EnvdRouteTest, HeaderThenHost) {
  http::request_header<> h;
  h.method(http::verb::post);
  h.target("/process.Process/Start");
  h.set(http::field::host, "49983-sb-host.vessel.example:443");
  EXPECT_EQ(sandboxOfRequest(h), "sb-host");
  h.set("E2b-Sandbox-Id", "sb-header");
  EXPECT_EQ(sandboxOfRequest(h), "sb-header");
  h.erase("E2b-Sandbox-Id");
  h.set(http::field::host, "127.0.0.1:49983");
  EXPECT_EQ(sandboxOfRequest(h), std::nullopt);
  // A signed URL that names no sandbox is nobody's: no signature is tried.
  h.method(http::verb::get);
  h.target("/files?path=%2Ftmp%2Fx&username=user&signature=v1_abc");
  EXPECT_EQ(sandboxOfRequest(h), std::nullopt);
}

}  // namespace
}  // namespace vessel::e2b::envd
