#include "hypervisor/hypervisor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vessel::hypervisor {
namespace {

using ::testing::HasSubstr;

MachineSpec good() {
  MachineSpec s;
  s.id = "vm-1";
  s.kernel = "/etc/hostname";  // any readable file passes validation
  s.disks = {{"/etc/hostname", true, "raw"}};
  s.run_dir = "/tmp/vessel-spec-test";
  s.console_log = "/tmp/vessel-spec-test.log";
  return s;
}

TEST(ValidateSpecTest, AcceptsAGoodSpec) { EXPECT_TRUE(validateSpec(good()).ok()); }

TEST(ValidateSpecTest, RefusesZeroAndHugeMemory) {
  MachineSpec s = good();
  s.memory_mib = 0;
  auto e = validateSpec(s);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(e.error().message(), HasSubstr("memory"));
  s.memory_mib = 1ull << 40;
  e = validateSpec(s);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.error().message(), HasSubstr("exceeds the host"));
}

TEST(ValidateSpecTest, RefusesMissingKernelAndDisk) {
  MachineSpec s = good();
  s.kernel = "/nonexistent/vmlinux";
  auto e = validateSpec(s);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code(), Code::kNotFound);
  EXPECT_THAT(e.error().message(), HasSubstr("kernel /nonexistent/vmlinux"));
  s = good();
  s.disks[0].path = "/nonexistent/root.ext4";
  e = validateSpec(s);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.error().message(), HasSubstr("disk /nonexistent/root.ext4"));
}

TEST(ValidateSpecTest, RefusesBadIdsAndVcpus) {
  MachineSpec s = good();
  s.id = "../../etc";
  EXPECT_FALSE(validateSpec(s).ok());
  s = good();
  s.vcpus = 0;
  EXPECT_FALSE(validateSpec(s).ok());
  s = good();
  s.cmdline = "init=/bin/sleep -- 100";
  EXPECT_FALSE(validateSpec(s).ok());
  s = good();
  s.run_dir = "relative";
  EXPECT_FALSE(validateSpec(s).ok());
}

}  // namespace
}  // namespace vessel::hypervisor
