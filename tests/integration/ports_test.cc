// Sandbox ports as a boundary (issue 25), against a real vesseld and a real
// guest: a native sandbox's ports are private by default, so a stranger
// who knows only its id does not reach a service bound to the guest's
// loopback; its tenant reaches it with a data-plane session.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "vesseld_harness.h"

namespace vessel {
namespace {

using testing::Reply;

class PortsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Ports go through the agent, never the guest's network: no egress needed.
    d_ = std::make_unique<testing::Vesseld>(VESSELD_PATH, std::vector<std::string>{"--no-egress"});
    ASSERT_TRUE(d_->start()) << "vesseld did not come up; log:\n" << d_->log();
  }
  void TearDown() override {
    if (d_->running()) {
      auto e = d_->stop();
      EXPECT_TRUE(e.exited && e.code == 0) << e.describe() << "\n" << d_->log();
    }
    EXPECT_THAT(testing::qemuProcessesUsing(d_->root()), ::testing::IsEmpty());
  }
  // GET on the envd listener for port `port` of sandbox `id`, named by an
  // absolute-form target (the client's Host is 127.0.0.1).
  Reply port(const std::string& id, int port, const std::string& token = "") {
    testing::Request r;
    r.target = "http://" + std::to_string(port) + "-" + id + ".vessel.localhost/";
    if (!token.empty()) r.headers.push_back("e2b-traffic-access-token: " + token);
    r.deadline = std::chrono::seconds(30);
    return testing::call(d_->envdPort(), r);
  }
  std::unique_ptr<testing::Vesseld> d_;
};

TEST_F(PortsTest, ANativeSandboxsLoopbackServiceIsPrivate) {
  std::string why;
  std::string id = d_->createSandbox("{}", &why);
  ASSERT_FALSE(id.empty()) << why << "\n" << d_->log();
  d_->sh(id,
         "mkdir -p /tmp/www && echo loopback-only > /tmp/www/index.html && "
         "httpd -p 127.0.0.1:8080 -h /tmp/www");
  std::string token = d_->session(id);
  ASSERT_FALSE(token.empty());
  // The tenant, with a session of the sandbox, reaches it (once httpd is up).
  Reply mine;
  for (int i = 0; i < 20; ++i) {
    mine = port(id, 8080, token);
    if (mine.status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_EQ(mine.status, 200) << mine.head << mine.body << "\n" << d_->log();
  EXPECT_THAT(mine.body, ::testing::HasSubstr("loopback-only"));
  // A stranger knowing only the id: no token, a made-up session, another
  // sandbox's traffic token shape. None reaches the guest.
  for (std::string t :
       {std::string(), std::string("vst_") + std::string(64, '0'), std::string("not-a-token")}) {
    Reply r = port(id, 8080, t);
    EXPECT_EQ(r.status, 403) << "token '" << t << "': " << r.head << r.body;
    EXPECT_THAT(r.body, ::testing::Not(::testing::HasSubstr("loopback-only")));
  }
  EXPECT_TRUE(d_->deleteSandbox(id));
  // Its session died with it: nothing reaches the port any more.
  Reply gone = port(id, 8080, token);
  EXPECT_NE(gone.status, 200) << gone.body;
}

}  // namespace
}  // namespace vessel
