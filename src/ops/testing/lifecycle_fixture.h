#pragma once
// The fixture of the lifecycle's unit tests (lifecycle_*_test.cc,
// reaper_test.cc, template_catalogue_test.cc): a Lifecycle over a fake
// node, a real SQLite store and a fake clock, without QEMU, in milliseconds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <filesystem>
#include <fstream>

#include "base/run_blocking.h"
#include "base/sha256.h"
#include "ops/lifecycle.h"
#include "ops/testing/fake_node.h"

namespace vessel::ops::testing {

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/lifecycle-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/templates");
    auto s = store::openSqlite(dir_ + "/vessel.db", &clock_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    // The API side's key: credential values are sealed at rest (store.h).
    ASSERT_TRUE(store_->useCredentialKey(std::string(32, 'k')).ok());
    ASSERT_TRUE(store_->createTenant("t1", "one").ok());
    ASSERT_TRUE(store_->createTenant("t2", "two").ok());
    templates_ = std::make_unique<templates::TemplateStore>(dir_ + "/templates", "q", "k");
    installTemplate("minimal");
    node_ = std::make_unique<FakeNode>(io_);
    lc_ = std::make_unique<Lifecycle>(io_, *store_, *node_, *templates_, clock_);
  }
  void TearDown() override {
    lc_.reset();
    std::filesystem::remove_all(dir_);
  }
  // rootfs_bytes: a sparse root image of that size instead of a few bytes.
  void installTemplate(const std::string& name, uint64_t rootfs_bytes = 0) {
    std::string staging = dir_ + "/staging-" + name;
    std::filesystem::create_directories(staging);
    templates::Manifest m;
    m.name = name;
    m.version = "v1";
    m.spec_hash = std::string(64, 'a');
    m.qemu_version = "q";
    m.kernel_sha256 = "k";
    m.created_at = "2026-01-01T00:00:00Z";
    m.memory_mib = 256;
    for (const char* f : {templates::kRootfsFile, templates::kMemoryFile, templates::kStateFile}) {
      std::ofstream(staging + "/" + f) << f;
      m.files[f] = sha256Hex(f);
    }
    if (rootfs_bytes) {
      std::string rootfs = staging + "/" + templates::kRootfsFile;
      std::filesystem::resize_file(rootfs, rootfs_bytes);
      m.files[templates::kRootfsFile] = *sha256File(rootfs);
    }
    ASSERT_TRUE(templates_->install(staging, m).ok());
  }
  // A lifecycle call that awaits the node, to its end.
  template <typename T>
  T run(asio::awaitable<T> a) {
    return runBlocking(io_, std::move(a));
  }
  // Runs every handler that is ready (the fake node never blocks unless told).
  void drain() {
    for (int i = 0; i < 100; ++i) {
      io_.restart();
      if (io_.poll() == 0) return;
    }
  }
  std::string state(const std::string& id, const std::string& tenant = "t1") {
    auto sb = store_->getSandbox(tenant, id);
    if (!sb.ok() || !*sb) return "absent";
    return std::string(stateName((*sb)->state));
  }
  store::OperationRecord op(const std::string& id) {
    auto o = store_->getOperation("t1", id);
    return o.ok() && *o ? **o : store::OperationRecord{};
  }
  std::string created(CreateRequest c = {}) {
    c.tenant = "t1";
    auto r = lc_->create(c);
    EXPECT_TRUE(r.ok()) << r.error().message();
    if (!r.ok()) return "";
    drain();
    EXPECT_EQ(op(r->operation.id).state, OpState::kDone);
    return r->sandbox.id;
  }
  // Starts awaitOperation on the io thread; the result lands in `*out`.
  void startAwait(std::optional<Result<store::OperationRecord>>* out, const std::string& tenant,
                  const std::string& op_id, std::chrono::milliseconds limit) {
    out->reset();
    auto deadline = std::chrono::steady_clock::now() + limit;
    asio::co_spawn(
        io_,
        [this, out, tenant, op_id, deadline]() -> asio::awaitable<void> {
          *out = co_await lc_->awaitOperation(tenant, op_id, deadline);
        },
        asio::detached);
  }
  std::vector<std::string> eventTypes(const std::string& sandbox_id) {
    std::vector<std::string> out;
    auto ev = store_->listEvents("t1", "", 0, 1000);
    if (ev.ok())
      for (auto& e : *ev)
        if (e.sandbox_id == sandbox_id) out.push_back(e.type + ":" + e.data_json);
    return out;
  }

  std::string dir_;
  FakeWallClock clock_;
  asio::io_context io_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<templates::TemplateStore> templates_;
  std::unique_ptr<FakeNode> node_;
  std::unique_ptr<Lifecycle> lc_;
};

}  // namespace vessel::ops::testing
