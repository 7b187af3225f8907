// The acceleration verdict's cache against a hypervisor whose probe guest
// fails in a chosen way (the interface's only fake here): a probe QEMU that
// could not open KVM names why and is not remembered (that is how this
// vesseld is set up, e.g. a jail that kept /dev/kvm from the VM), one that
// failed on the host's KVM itself is remembered.
#include "node/accel.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>

#include "base/fd.h"
#include "base/run_blocking.h"

namespace vessel::node {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class FailingHypervisor : public hypervisor::Hypervisor {
 public:
  explicit FailingHypervisor(std::string why) : why_(std::move(why)) {}
  std::string_view name() const override { return "failing"; }
  asio::awaitable<Result<std::unique_ptr<hypervisor::Vm>>> start(hypervisor::MachineSpec spec,
                                                                 Clock::time_point) override {
    ++starts;
    co_return Error(Code::kUnavailable, "start machine " + spec.id + ": " + why_);
  }
  int starts = 0;

 private:
  std::string why_;
};

class AccelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // chooseAccel opens /dev/kvm itself before it probes.
    if (!Fd::open("/dev/kvm", O_RDWR).ok()) GTEST_SKIP() << "/dev/kvm does not open here";
    char t[] = "/tmp/vessel-accel-test-XXXXXX";
    dir_ = ::mkdtemp(t);
    std::ofstream(dir_ + "/kernel") << "kernel";
    in_ = {dir_ + "/kernel", dir_ + "/image", "", dir_ + "/probe", dir_ + "/cache", "test-qemu"};
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  bool remembered() {
    std::error_code ec;
    return fs::exists(dir_ + "/cache/accel", ec) && !fs::is_empty(dir_ + "/cache/accel", ec);
  }
  asio::io_context io_;
  std::string dir_;
  ProbeInputs in_;
};

TEST_F(AccelCacheTest, ProbeThatCouldNotOpenKvmIsNamedAndNotRemembered) {
  FailingHypervisor hv(
      "qemu exited during start-up: exit code 1; qemu stderr: Could not access KVM kernel "
      "module: Permission denied");
  auto first = runBlocking(io_, chooseAccel(AccelMode::kAuto, hv, in_));
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_EQ(first->accel, hypervisor::Accel::kTcg);
  EXPECT_THAT(first->reason, HasSubstr("Permission denied"));
  EXPECT_FALSE(remembered());
  auto second = runBlocking(io_, chooseAccel(AccelMode::kAuto, hv, in_));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->cached);
  EXPECT_EQ(hv.starts, 2) << "the next start probes again";
}

TEST_F(AccelCacheTest, ProbeThatFailedOnTheHostsKvmIsRemembered) {
  FailingHypervisor hv("the guest did not say hello before the deadline");
  auto first = runBlocking(io_, chooseAccel(AccelMode::kAuto, hv, in_));
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_EQ(first->accel, hypervisor::Accel::kTcg);
  EXPECT_THAT(first->reason, HasSubstr("did not say hello"));
  EXPECT_TRUE(remembered());
  auto second = runBlocking(io_, chooseAccel(AccelMode::kAuto, hv, in_));
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->cached);
  EXPECT_EQ(second->reason, first->reason);
  EXPECT_EQ(hv.starts, 1);
}

TEST(AccelModeTest, AccelModes) {
  EXPECT_EQ(*parseAccelMode("tcg"), AccelMode::kTcg);
  EXPECT_EQ(*parseAccelMode("auto"), AccelMode::kAuto);
  auto bad = parseAccelMode("xen");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("auto, kvm or tcg"), std::string::npos);
}

}  // namespace
}  // namespace vessel::node
