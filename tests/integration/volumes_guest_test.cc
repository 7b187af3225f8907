// Volumes in sandboxes (issue 27, the first guest slice): a real vesseld
// creating real guests that mount volumes at create, each mount served by
// a confined vessel-volume-server over the agent channel; every reply
// checked against api/openapi.yaml. A file written in one sandbox is read
// in the next after the first is deleted, and through the files API; two
// sandboxes at once each read the other's file; a read-only mount refuses
// writes in the guest; a full volume is ENOSPC in the guest; a missing or
// another tenant's volume is refused before anything boots; a forced
// delete of a mounted volume ends its mounts, and a sandbox's delete its
// servers. Root only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>

#include "base/sha256.h"
#include "store/store.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Reply;
using testing::str;

// The file servers serving this vesseld's volumes: processes whose root
// (they chroot into the volume) is under its volumes' mount directory.
int fileServers(const std::string& mnt_dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& p : fs::directory_iterator("/proc", ec)) {
    auto root = fs::read_symlink(p.path() / "root", ec);
    if (!ec && root.string().rfind(mnt_dir, 0) == 0) ++n;
  }
  return n;
}

// fileServers() once it is `n`, or what it is after 20 s (a server stops
// as its relay notices the sandbox went).
int fileServersSettled(const std::string& mnt_dir, int n) {
  for (int i = 0; i < 200 && fileServers(mnt_dir) != n; ++i) ::usleep(100 * 1000);
  return fileServers(mnt_dir);
}

class VolumesGuestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    d_ = new testing::Vesseld(VESSELD_PATH, {"--no-egress", "--warm-pool=none"});
    d_->setContract(testing::apiContract());
    ASSERT_TRUE(d_->start()) << d_->log();
    auto db = store::openSqlite(d_->stateDir() + "/vessel.db");
    ASSERT_TRUE(db.ok()) << db.error().message();
    ASSERT_TRUE((*db)->createTenant("t2", "second").ok());
    ASSERT_TRUE((*db)->addApiKey("t2", sha256Hex(kKey2)).ok());
    for (auto [name, mib] : {std::pair{"shared", 64}, std::pair{"small", 16}})
      ASSERT_EQ(make(name, mib).status, 201);
    ASSERT_EQ(make("theirs", 16, kKey2).status, 201);
  }
  static void TearDownTestSuite() {
    if (!d_) return;
    if (d_->running()) {
      auto e = d_->stop();
      EXPECT_TRUE(e.exited && e.code == 0) << e.describe() << "\n" << d_->log();
    }
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d_->stateDir() + "/volumes/mnt", ec))
      ::umount2(e.path().c_str(), MNT_DETACH);
    delete d_;
    d_ = nullptr;
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (guests, loop devices, mounts)";
    ASSERT_NE(d_, nullptr);
  }
  static Reply call(const std::string& method, const std::string& target,
                    const std::string& body = "", const std::string& key = "-") {
    return d_->call(method, target, body, key);
  }
  static Reply make(const std::string& name, int mib, const std::string& key = "-") {
    return call("POST", "/v1/volumes",
                boost::json::serialize(boost::json::object{{"name", name}, {"size_mib", mib}}),
                key);
  }
  // A sandbox mounting `mounts` ({name, path, read_only}); "" on failure.
  static std::string sandbox(const boost::json::array& mounts, std::string* why) {
    return d_->createSandbox(boost::json::serialize(boost::json::object{{"volumes", mounts}}), why);
  }
  static boost::json::object mount(const char* name, const char* path, bool ro = false) {
    return {{"name", name}, {"path", path}, {"read_only", ro}};
  }
  static std::string content(const std::string& vol, const std::string& path) {
    Reply r = call("GET", "/v1/volumes/" + vol + "/files/content?path=" + path);
    if (r.status != 200) return "<" + std::to_string(r.status) + " " + r.body + ">";
    return testing::dechunk(r.body).value_or("<cut>");
  }
  std::string mntDir() { return d_->stateDir() + "/volumes/mnt/"; }

  static constexpr const char* kKey2 = "vsk_volumes-guest-second-tenant";
  static testing::Vesseld* d_;
};
testing::Vesseld* VolumesGuestTest::d_ = nullptr;

TEST_F(VolumesGuestTest, WrittenInOneSandboxReadInTheNextAndThroughTheApi) {
  std::string why;
  std::string a = sandbox({mount("shared", "/data")}, &why);
  ASSERT_FALSE(a.empty()) << why << "\n" << d_->log();
  EXPECT_EQ(d_->sh(a,
                   "mkdir -p /data/dir && echo hello from a > /data/dir/one.txt && "
                   "cat /data/dir/one.txt"),
            "hello from a\n");
  // The guest's owner and mode reach the volume.
  EXPECT_EQ(d_->sh(a,
                   "chmod 640 /data/dir/one.txt && chown 1000:1000 /data/dir/one.txt && "
                   "stat -c '%a %u %g' /data/dir/one.txt"),
            "640 1000 1000\n");
  EXPECT_EQ(fileServers(mntDir()), 1);
  ASSERT_TRUE(d_->deleteSandbox(a));
  EXPECT_EQ(fileServersSettled(mntDir(), 0), 0);  // its server ended with it

  std::string b = sandbox({mount("shared", "/mnt/shared")}, &why);
  ASSERT_FALSE(b.empty()) << why << "\n" << d_->log();
  EXPECT_EQ(d_->sh(b, "cat /mnt/shared/dir/one.txt"), "hello from a\n");
  EXPECT_EQ(d_->sh(b, "echo and from b >> /mnt/shared/dir/one.txt && sync"), "");
  EXPECT_EQ(content("shared", "/dir/one.txt"), "hello from a\nand from b\n");
  ASSERT_TRUE(d_->deleteSandbox(b));
}

TEST_F(VolumesGuestTest, TwoSandboxesAtOnceReadOnlyMountsAndAFullVolume) {
  std::string why;
  std::string a = sandbox({mount("shared", "/data"), mount("small", "/small")}, &why);
  ASSERT_FALSE(a.empty()) << why << "\n" << d_->log();
  std::string b = sandbox({mount("shared", "/data"), mount("shared", "/ro", true)}, &why);
  ASSERT_FALSE(b.empty()) << why << "\n" << d_->log();
  EXPECT_EQ(fileServers(mntDir()), 4);

  EXPECT_EQ(d_->sh(a, "echo from a > /data/a.txt"), "");
  EXPECT_EQ(d_->sh(b, "echo from b > /data/b.txt"), "");
  EXPECT_EQ(d_->sh(a, "cat /data/b.txt"), "from b\n");
  EXPECT_EQ(d_->sh(b, "cat /data/a.txt /ro/a.txt"), "from a\nfrom a\n");
  // Close-to-open: a rewrite in one is what the other's next open reads.
  EXPECT_EQ(d_->sh(a, "echo again > /data/a.txt"), "");
  EXPECT_EQ(d_->sh(b, "cat /data/a.txt"), "again\n");

  // Read-only: refused in the guest, the file untouched.
  std::string ro = d_->sh(b, "echo x > /ro/a.txt; echo rc=$?; touch /ro/new; echo rc=$?");
  EXPECT_THAT(ro, HasSubstr("Read-only file system")) << ro;
  EXPECT_THAT(ro, Not(HasSubstr("rc=0"))) << ro;
  EXPECT_EQ(content("shared", "/a.txt"), "again\n");
  EXPECT_EQ(call("GET", "/v1/volumes/shared/files?path=/new").status, 404);

  // Full: 16 MiB hold less than 32 MiB, and the guest hears ENOSPC.
  std::string full =
      d_->sh(a, "dd if=/dev/zero of=/small/fill bs=1M count=32 2>&1; sync; echo rc=$?");
  EXPECT_THAT(full, HasSubstr("No space left on device")) << full;

  // A volume a sandbox mounts is not deleted without force; forced, its
  // mount ends (its server stops, the guest's calls on it fail).
  EXPECT_EQ(call("DELETE", "/v1/volumes/small").status, 409);
  EXPECT_EQ(call("DELETE", "/v1/volumes/small?force=true").status, 204);
  EXPECT_EQ(fileServersSettled(mntDir(), 3), 3);
  std::string after = d_->sh(a, "ls /small/fill 2>&1; echo rc=$?");
  EXPECT_THAT(after, Not(HasSubstr("rc=0"))) << after;
  EXPECT_EQ(d_->sh(a, "cat /data/b.txt"), "from b\n");  // its other mount is untouched
  ASSERT_TRUE(d_->deleteSandbox(a));
  ASSERT_TRUE(d_->deleteSandbox(b));
  EXPECT_EQ(fileServersSettled(mntDir(), 0), 0);
  EXPECT_EQ(call("DELETE", "/v1/volumes/small").status, 404);
}

// Not kept yet (docs/volumes.md, limits): a pause ends the mount's server
// and the resumed guest finds the session aborted; the sandbox itself and
// the volume's files are unharmed.
TEST_F(VolumesGuestTest, PauseAndResumeEndTheMountsCleanlyForNow) {
  std::string why;
  std::string id = sandbox({mount("shared", "/data")}, &why);
  ASSERT_FALSE(id.empty()) << why << "\n" << d_->log();
  EXPECT_EQ(d_->sh(id, "echo paused > /data/p.txt"), "");
  Reply p = call("POST", "/v1/sandboxes/" + id + ":pause");
  ASSERT_EQ(p.status, 202) << p.body;
  ASSERT_EQ(d_->finish(str(p.js().at("operation"), "id")), "done") << d_->log();
  EXPECT_EQ(fileServersSettled(mntDir(), 0), 0);
  Reply r = call("POST", "/v1/sandboxes/" + id + ":resume");
  ASSERT_EQ(r.status, 202) << r.body;
  ASSERT_EQ(d_->finish(str(r.js().at("operation"), "id")), "done") << d_->log();
  std::string after = d_->sh(id, "cat /data/p.txt 2>&1; echo rc=$?; echo alive");
  EXPECT_THAT(after, Not(HasSubstr("rc=0"))) << after;
  EXPECT_THAT(after, HasSubstr("alive")) << after;
  EXPECT_EQ(content("shared", "/p.txt"), "paused\n");
  ASSERT_TRUE(d_->deleteSandbox(id));
}

TEST_F(VolumesGuestTest, TheCliMountsWithVolumeFlags) {
  ASSERT_EQ(call("PUT", "/v1/volumes/shared/files/content?path=/cli.txt", "seeded\n").status, 201);
  auto cli = [](const std::vector<std::string>& args) {
    return testing::runCli(VESSEL_CLI_PATH, *d_, args);
  };
  auto bad = cli({"sandbox", "create", "--volume", "shared"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, HasSubstr("NAME:/PATH[:ro]"));
  auto r = cli({"sandbox", "create", "--volume", "shared:/cli:ro"});
  ASSERT_EQ(r.code, 0) << r.err << "\n" << d_->log();
  std::string id = r.last();
  std::string out = d_->sh(id, "cat /cli/cli.txt; touch /cli/x; echo rc=$?");
  EXPECT_THAT(out, HasSubstr("seeded\n"));
  EXPECT_THAT(out, HasSubstr("Read-only file system")) << out;
  ASSERT_TRUE(d_->deleteSandbox(id));
}

TEST_F(VolumesGuestTest, MissingOrForeignVolumesAreRefusedBeforeABoot) {
  auto create = [](const boost::json::array& m) {
    return call("POST", "/v1/sandboxes",
                boost::json::serialize(boost::json::object{{"volumes", m}}));
  };
  Reply missing = create({mount("nope", "/data")});
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_THAT(missing.body, HasSubstr("volume 'nope' does not exist"));
  // Another tenant's volume is as absent as one that never existed.
  Reply foreign = create({mount("theirs", "/data")});
  EXPECT_EQ(foreign.status, 404) << foreign.body;
  for (const auto& bad :
       {boost::json::array{mount("shared", "/")}, boost::json::array{mount("shared", "/proc/x")},
        boost::json::array{mount("shared", "/a/../b")},
        boost::json::array{mount("shared", "/d"), mount("shared", "/d/e")}}) {
    Reply r = create(bad);
    EXPECT_EQ(r.status, 400) << boost::json::serialize(bad) << " " << r.body;
  }
  // Nothing was made of them.
  auto list = call("GET", "/v1/sandboxes").js();
  for (const auto& s : list.at("sandboxes").as_array())
    EXPECT_EQ(str(s, "state"), "deleted") << boost::json::serialize(s);
}

}  // namespace
}  // namespace vessel
