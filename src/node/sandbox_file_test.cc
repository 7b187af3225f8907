#include "node/sandbox_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vessel::node {
namespace {

SandboxFile sample() {
  SandboxFile f;
  f.id = "sb-0123456789ab";
  f.template_id = "minimal@abc";
  f.vm_dir = "/var/lib/vessel/runtime/vms/vm-1";
  f.hostname = "sb-0123456789ab";
  f.env = {"A=1", "B=two words"};
  f.network = {true, "-----BEGIN CERTIFICATE-----\nx\n"};
  f.network_slot = 7;
  f.vcpus = 2;
  f.memory_mib = 512;
  f.disk_mib = 4096;
  f.vm_pid = 4242;
  f.vm_start_ticks = 123456789;
  f.start_pid = 57;
  return f;
}

TEST(SandboxFileTest, RoundTrips) {
  SandboxFile f = sample();
  auto back = decodeSandboxFile(encodeSandboxFile(f));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(*back, f);
  // A paused one has no VM and no slot.
  SandboxFile p = sample();
  p.paused = true;
  p.vm_pid = 0;
  p.vm_start_ticks = 0;
  p.network_slot.reset();
  auto pb = decodeSandboxFile(encodeSandboxFile(p));
  ASSERT_TRUE(pb.ok());
  EXPECT_EQ(*pb, p);
  // Paused with only its disk kept.
  p.disk_only = true;
  auto db = decodeSandboxFile(encodeSandboxFile(p));
  ASSERT_TRUE(db.ok());
  EXPECT_TRUE(db->disk_only);
  EXPECT_EQ(*db, p);
}

TEST(SandboxFileTest, ReadsWhatEarlierVersionsWrote) {
  // No network object, no slot: a record from before egress.
  auto f = decodeSandboxFile(
      R"({"id":"sb-1","template":"minimal@v","vm_dir":"/x","hostname":"h","env":[],)"
      R"("vcpus":1,"memory_mib":256,"state":"running","vm_pid":10,"vm_start_ticks":5})");
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_FALSE(f->network.route);
  EXPECT_FALSE(f->network_slot.has_value());
  EXPECT_EQ(f->vm_pid, 10);
}

TEST(SandboxFileTest, CorruptRecordsAreErrorsNotHalfReads) {
  std::string good = encodeSandboxFile(sample());
  for (std::string bad :
       {std::string("{"), std::string("[]"), std::string("null"), good.substr(0, good.size() / 2),
        std::string(R"({"id":"sb-1"})"),
        std::string(R"({"id":"sb-1","template":"minimal@v","vm_dir":"/x","hostname":"h",)"
                    R"("env":[1],"vcpus":1,"memory_mib":256,"state":"running"})"),
        std::string(R"({"id":"sb-1","template":"minimal@v","vm_dir":"/x","hostname":"h",)"
                    R"("env":[],"vcpus":1,"memory_mib":256,"state":"sleeping"})"),
        std::string(R"({"id":"sb-1","template":"nover","vm_dir":"/x","hostname":"h",)"
                    R"("env":[],"vcpus":1,"memory_mib":256,"state":"running"})"),
        std::string(R"({"id":"sb-1","template":"m@v","vm_dir":"/x","hostname":"h",)"
                    R"("env":[],"vcpus":-1,"memory_mib":256,"state":"running"})")}) {
    auto r = decodeSandboxFile(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), Code::kInternal);
    EXPECT_THAT(r.error().message(), ::testing::HasSubstr("corrupt")) << bad;
  }
  EXPECT_FALSE(decodeSandboxFile(std::string(2 << 20, ' ')).ok());
}

}  // namespace
}  // namespace vessel::node
