// Sessions issued and resolved through the typed pair, with an injected
// clock: expiry is proven by moving time, not by sleeping.
#include "api/sessions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace vessel::api {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class SessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/sessions-" + std::to_string(::getpid()) + ".db";
    std::filesystem::remove(path_);
    auto s = store::openSqlite(path_, &clock_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    ASSERT_TRUE(store_->createTenant("t1", "one").ok());
    ASSERT_TRUE(store_->createTenant("t2", "two").ok());
    for (auto [id, st] : {std::pair{"sb-run", store::SandboxState::kRunning},
                          std::pair{"sb-paused", store::SandboxState::kPaused}}) {
      store::SandboxRecord r{id, "t1", "minimal", st};
      ASSERT_TRUE(store_->insertSandbox(r).ok());
    }
    SessionOptions o;
    o.data_url = "http://127.0.0.1:8081";
    sessions_ = std::make_unique<Sessions>(*store_, o, clock_);
  }
  void TearDown() override {
    sessions_.reset();
    store_.reset();
    std::filesystem::remove(path_);
  }
  std::string path_;
  FakeWallClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Sessions> sessions_;
};

TEST_F(SessionsTest, IssueResolveAndExpireByTheClock) {
  auto g = sessions_->issue("t1", "sb-run", 60s);
  ASSERT_TRUE(g.ok()) << g.error().message();
  EXPECT_EQ(g->expires_ms, clock_.nowMs() + 60'000);
  EXPECT_EQ(g->data_url, "http://127.0.0.1:8081");
  auto b = sessions_->resolve(g->token);
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(b->tenant_id, "t1");
  EXPECT_EQ(b->sandbox_id, "sb-run");
  clock_.advance(59s);
  EXPECT_TRUE(sessions_->resolve(g->token).ok());
  clock_.advance(1s);
  auto late = sessions_->resolve(g->token);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code(), Code::kUnauthenticated);
  EXPECT_THAT(late.error().message(), HasSubstr("expired"));
}

TEST_F(SessionsTest, RefusesOtherTenantsStoppedSandboxesAndRevokedTokens) {
  EXPECT_EQ(sessions_->issue("t2", "sb-run", 0s).error().code(), Code::kNotFound);
  std::string state;
  auto p = sessions_->issue("t1", "sb-paused", 0s, &state);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(state, "paused");
  EXPECT_EQ(sessions_->resolve("vst_nonsense").error().code(), Code::kUnauthenticated);
  auto g = sessions_->issue("t1", "sb-run", 0s);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->expires_ms, clock_.nowMs() + 900'000);  // the default ttl
  ASSERT_TRUE(store_->revokeSessions("sb-run").ok());
  EXPECT_EQ(sessions_->resolve(g->token).error().code(), Code::kUnauthenticated);
  // A sandbox that paused after the session was issued: 409 with its state.
  auto g2 = sessions_->issue("t1", "sb-run", 0s);
  ASSERT_TRUE(g2.ok());
  ASSERT_TRUE(store_->setSandboxState("sb-run", store::SandboxState::kPaused, "").ok());
  std::string st;
  auto r = sessions_->resolve(g2->token, &st);
  EXPECT_EQ(r.error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(st, "paused");
}

}  // namespace
}  // namespace vessel::api
