// A sandbox's disk end to end (issue 13): its size is chosen at create,
// the guest sees that much (a 200 MiB upload into /tmp fits a 512 MiB
// disk), writing past it is ENOSPC in the guest while the host file stays
// sparse and capped, pause and resume keep it; and a state disk below the
// free-space threshold refuses creates. One daemon, real guests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "http_client.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::Reply;
using testing::str;

constexpr uint64_t kMiB = 1 << 20;

int64_t num(const boost::json::value& v, const char* key) {
  const auto* p = v.as_object().if_contains(key);
  return p ? p->to_number<int64_t>() : -1;
}

// Bytes a file takes on the host's disk (not its apparent size).
uint64_t allocated(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ~uint64_t{0};
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

class DiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    d_ = std::make_unique<testing::Vesseld>(VESSELD_PATH,
                                            std::vector<std::string>{"--max-disk-mib", "4096"});
    d_->setContract(testing::apiContract());
    ASSERT_TRUE(d_->start()) << "vesseld did not come up; log:\n" << d_->log();
  }
  void TearDown() override {
    if (d_->running()) {
      auto e = d_->stop();
      EXPECT_TRUE(e.exited && e.code == 0) << e.describe() << "\n" << d_->log();
    }
    EXPECT_THAT(testing::qemuProcessesUsing(d_->root()), ::testing::IsEmpty());
  }
  // The sandbox's overlay on the host, from its runtime record.
  std::string overlayOf(const std::string& id) {
    std::ifstream in(d_->stateDir() + "/runtime/sandboxes/" + id + "/sandbox.json");
    std::stringstream ss;
    ss << in.rdbuf();
    boost::system::error_code ec;
    auto v = boost::json::parse(ss.str(), ec);
    if (ec || !v.is_object()) return "";
    return str(v, "vm_dir") + "/disk.qcow2";
  }
  // The root filesystem's size and use in the guest, MiB (`df -m /`).
  std::pair<int64_t, int64_t> guestDf(const std::string& id) {
    std::string out = d_->sh(id, "df -m / | tail -n 1");
    std::istringstream in(out);
    std::string dev;
    int64_t size = -1, used = -1;
    in >> dev >> size >> used;
    return {size, used};
  }
  std::unique_ptr<testing::Vesseld> d_;
};

TEST_F(DiskTest, SizedAtCreateSparseOnTheHostCappedInTheGuestKeptAcrossPause) {
  // Asked for at create, validated at the edge and against the template.
  Reply tiny = d_->call("POST", "/v1/sandboxes", R"({"disk_mib":16})");
  EXPECT_EQ(tiny.status, 400) << tiny.body;
  Reply huge = d_->call("POST", "/v1/sandboxes", R"({"disk_mib":8192})");
  EXPECT_EQ(huge.status, 400) << huge.body;
  EXPECT_THAT(huge.body, HasSubstr("4096"));  // --max-disk-mib

  std::string why;
  std::string id = d_->createSandbox(R"({"disk_mib":512})", &why);
  ASSERT_FALSE(id.empty()) << why << "\n" << d_->log();
  Reply got = d_->call("GET", "/v1/sandboxes/" + id);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(num(got.js(), "disk_mib"), 512);

  // Sparse: right after the create the overlay holds the grown filesystem's
  // metadata only, not 512 MiB.
  std::string overlay = overlayOf(id);
  ASSERT_FALSE(overlay.empty());
  EXPECT_LT(allocated(overlay), 64 * kMiB) << overlay;

  // The guest sees ~512 MiB (ext4 keeps some for its metadata and journal).
  auto [size, used] = guestDf(id);
  EXPECT_GE(size, 450) << "df: " << size;
  EXPECT_LE(size, 512);

  // 200 MiB through the data plane into /tmp: on the disk, not in RAM (the
  // minimal template has 256 MiB of memory).
  std::string tok = d_->session(id);
  ASSERT_FALSE(tok.empty());
  std::string blob(200 * kMiB, 'v');
  Reply up = d_->data(tok, "PUT", "/v1/files?path=/tmp/big.bin&mode=0600", blob, false);
  ASSERT_EQ(up.status, 201) << up.body.substr(0, 500);
  blob.clear();
  blob.shrink_to_fit();
  EXPECT_EQ(d_->sh(id, "stat -c %s /tmp/big.bin"), "209715200\n");
  EXPECT_GE(guestDf(id).second, 200);

  // Past the cap: ENOSPC in the guest; the host file stays within it.
  std::string fill = d_->sh(id, "dd if=/dev/zero of=/home/user/fill bs=1M count=600 2>&1; sync");
  EXPECT_THAT(fill, HasSubstr("No space left on device"));
  EXPECT_LT(allocated(overlay), (512 + 32) * kMiB) << overlay;
  EXPECT_GT(allocated(overlay), 200 * kMiB) << overlay;
  d_->sh(id, "rm -f /home/user/fill");

  // Pause and resume keep the size and the files.
  Reply p = d_->call("POST", "/v1/sandboxes/" + id + ":pause");
  ASSERT_EQ(p.status, 202) << p.body;
  ASSERT_EQ(d_->finish(str(p.js().at("operation"), "id")), "done") << d_->log();
  Reply r = d_->call("POST", "/v1/sandboxes/" + id + ":resume");
  ASSERT_EQ(r.status, 202) << r.body;
  ASSERT_EQ(d_->finish(str(r.js().at("operation"), "id")), "done") << d_->log();
  EXPECT_EQ(guestDf(id).first, size);
  EXPECT_EQ(d_->sh(id, "stat -c %s /tmp/big.bin"), "209715200\n");
  EXPECT_EQ(num(d_->call("GET", "/v1/sandboxes/" + id).js(), "disk_mib"), 512);
  EXPECT_TRUE(d_->deleteSandbox(id));

  // Without disk_mib: the template's default, 2048 MiB.
  std::string dflt = d_->createSandbox("{}", &why);
  ASSERT_FALSE(dflt.empty()) << why;
  EXPECT_EQ(num(d_->call("GET", "/v1/sandboxes/" + dflt).js(), "disk_mib"), 2048);
  EXPECT_GE(guestDf(dflt).first, 1900);
  EXPECT_TRUE(d_->deleteSandbox(dflt));

  // A state disk below the threshold: creates are refused, clearly.
  d_->stop();
  d_->extraArgs().push_back("--min-free-disk-mib=1000000000");
  ASSERT_TRUE(d_->start()) << d_->log();
  Reply full = d_->call("POST", "/v1/sandboxes", "{}");
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_THAT(full.body, HasSubstr("create refused: the state disk is nearly full"));
  EXPECT_THAT(full.body, HasSubstr(d_->stateDir()));
}

}  // namespace
}  // namespace vessel
