// A sandbox's attributes beside its record, owned by the lifecycle:
// ingress settings come with the typed create request, are stored in the
// create's own transaction (a real SQLite store whose ingress write fails
// leaves no sandbox), are kept by every fork, and are read through the
// lifecycle; network settings are read typed.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include "ops/lifecycle.h"
#include "ops/testing/lifecycle_fixture.h"

namespace vessel::ops {
namespace {

// The lifecycle fixture (ops/testing/lifecycle_fixture.h: SQLite on disk
// in dir_, a fake node), with the database reachable behind its back.
class SandboxAttributesTest : public testing::LifecycleTest {
 protected:
  std::string db() const { return dir_ + "/vessel.db"; }
  // Runs `sql` on the database behind the store's back.
  void rawExec(const std::string& sql) {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db().c_str(), &h), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(h);
  }
  std::optional<IngressSpec> ingressOf(const std::string& id) {
    auto i = lc_->ingress(id);
    EXPECT_TRUE(i.ok()) << id << ": " << i.error().message();
    return i.ok() ? *i : std::nullopt;
  }
};

const IngressSpec kPrivate{false, "inside.test:${PORT}"};

TEST_F(SandboxAttributesTest, TheCreatesIngressSettingsAreStoredWithTheSandbox) {
  CreateRequest c;
  c.ingress = kPrivate;
  auto r = lc_->create([&] {
    c.tenant = "t1";
    return c;
  }());
  ASSERT_TRUE(r.ok()) << r.error().message();
  // In the record the create answers with and in the store before the VM exists.
  EXPECT_EQ(r->sandbox.ingress, std::optional(kPrivate));
  EXPECT_EQ(node_->count("create"), 0);
  EXPECT_EQ(ingressOf(r->sandbox.id), std::optional(kPrivate));
  drain();
  EXPECT_EQ(lc_->get("t1", r->sandbox.id)->ingress, std::optional(kPrivate));
  // None given: none stored, the front end's default applies.
  std::string plain = created(CreateRequest{});
  EXPECT_EQ(ingressOf(plain), std::nullopt);
  // A sandbox that does not exist has no settings to trust.
  EXPECT_EQ(lc_->ingress("sb-nope").error().code(), Code::kNotFound);
}

TEST_F(SandboxAttributesTest, AFailedIngressWriteLeavesNoSandbox) {
  // The store's ingress write fails (a trigger aborts it): the create's
  // transaction rolls back, so there is no sandbox, public or private.
  rawExec(
      "CREATE TRIGGER refuse_ingress BEFORE INSERT ON sandbox_ingress "
      "BEGIN SELECT RAISE(ABORT, 'ingress write refused'); END;");
  CreateRequest c;
  c.tenant = "t1";
  c.ingress = kPrivate;
  auto r = lc_->create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("ingress write refused"), std::string::npos)
      << r.error().message();
  drain();
  auto page = lc_->list(ListRequest{.tenant = "t1"});
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->sandboxes.empty());
  EXPECT_EQ(node_->count("create"), 0);
  EXPECT_EQ(store_->tenantUsage("t1")->sandboxes, 0);
}

TEST_F(SandboxAttributesTest, ANativeForkKeepsItsParentsPrivatePorts) {
  CreateRequest c;
  c.ingress = kPrivate;
  std::string parent = created(c);
  auto f = lc_->fork("t1", parent, 2);
  ASSERT_TRUE(f.ok()) << f.error().message();
  ASSERT_EQ(f->copies.size(), 2u);
  // Private from the moment the copies are recorded, before their VMs exist.
  for (const auto& copy : f->copies) {
    EXPECT_EQ(copy.ingress, std::optional(kPrivate));
    EXPECT_EQ(ingressOf(copy.id), std::optional(kPrivate)) << copy.id;
  }
  drain();
  std::string child = f->copies[0].id;
  EXPECT_EQ(lc_->get("t1", child)->state, SandboxState::kRunning);
  // A fork of the fork too.
  auto g = lc_->fork("t1", child, 1);
  ASSERT_TRUE(g.ok()) << g.error().message();
  drain();
  EXPECT_EQ(ingressOf(g->copies[0].id), std::optional(kPrivate));
  // And a copy of a sandbox created without settings has none either.
  std::string plain = created(CreateRequest{});
  auto h = lc_->fork("t1", plain, 1);
  ASSERT_TRUE(h.ok()) << h.error().message();
  EXPECT_EQ(ingressOf(h->copies[0].id), std::nullopt);
  drain();
}

TEST_F(SandboxAttributesTest, IngressSettingsOutliveARestart) {
  CreateRequest c;
  c.ingress = kPrivate;
  std::string id = created(c);
  lc_.reset();
  auto again = store::openSqlite(db(), &clock_);
  ASSERT_TRUE(again.ok()) << again.error().message();
  Lifecycle next(io_, **again, *node_, *templates_, clock_);
  auto i = next.ingress(id);
  ASSERT_TRUE(i.ok()) << i.error().message();
  EXPECT_EQ(*i, std::optional(kPrivate));
}

TEST_F(SandboxAttributesTest, GivenNetworkIsReadTyped) {
  std::string id = created(CreateRequest{});
  auto none = lc_->egress().givenNetwork(id);
  ASSERT_TRUE(none.ok()) << none.error().message();
  EXPECT_FALSE(none->has_value());  // the fake node stores nothing
  NetworkSpec n{"allowlist", {"a.test"}, {"gh"}, {}, {"10.0.0.0/8"}};
  ASSERT_TRUE(store_->setSandboxNetwork(id, n).ok());
  auto got = lc_->egress().givenNetwork(id);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, n);
}

}  // namespace
}  // namespace vessel::ops
