// Volumes through the API (issue 27, first slice: the host side): a real
// vesseld (no sandbox is needed yet: volumes are not mounted in guests) over
// real HTTP, every reply checked against api/openapi.yaml; real ext4
// images, loop devices and mounts (root only). Creates, names and sizes,
// the tenant quota, clone and snapshot, the files API (streamed both ways,
// atomic, ENOSPC at the size, nothing outside the volume), delete refused
// while mounted unless forced, and a kill -9 that loses nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>

#include "base/sha256.h"
#include "store/store.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::Reply;
using testing::str;

// How many mounts /proc/self/mountinfo lists whose mount point holds
// `part` (a path ending in a volume's id, with " ": exactly there).
int mountsWith(const std::string& part) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.find(part) != std::string::npos;
  return n;
}
int mountsAt(const std::string& tail) { return mountsWith(tail + " "); }

class VolumesApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    d_ = new testing::Vesseld(
        VESSELD_PATH,
        {"--no-egress", "--warm-pool=none", "--tenant-max-volume-mib=400", "--max-volume-mib=256"});
    d_->setContract(testing::apiContract());
    ASSERT_TRUE(d_->start()) << d_->log();
    auto db = store::openSqlite(d_->stateDir() + "/vessel.db");
    ASSERT_TRUE(db.ok()) << db.error().message();
    ASSERT_TRUE((*db)->createTenant("t2", "second").ok());
    ASSERT_TRUE((*db)->addApiKey("t2", sha256Hex(kKey2)).ok());
  }
  static void TearDownTestSuite() {
    if (!d_) return;
    if (d_->running()) {
      auto e = d_->stop();
      EXPECT_TRUE(e.exited && e.code == 0) << e.describe() << "\n" << d_->log();
    }
    // A clean stop unmounts every volume; what a failure left is detached
    // here, before the scratch directory goes.
    EXPECT_EQ(mountsWith(d_->stateDir() + "/volumes/mnt/"), 0);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d_->stateDir() + "/volumes/mnt", ec))
      ::umount2(e.path().c_str(), MNT_DETACH);
    delete d_;
    d_ = nullptr;
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (loop devices, mounts)";
    ASSERT_NE(d_, nullptr);
  }
  static Reply call(const std::string& method, const std::string& target,
                    const std::string& body = "", const std::string& key = "-") {
    return d_->call(method, target, body, key);
  }
  static Reply make(const std::string& name, int mib) {
    return call("POST", "/v1/volumes",
                boost::json::serialize(boost::json::object{{"name", name}, {"size_mib", mib}}));
  }
  static std::string content(const std::string& vol, const std::string& path) {
    Reply r = call("GET", "/v1/volumes/" + vol + "/files/content?path=" + path);
    if (r.status != 200) return "<" + std::to_string(r.status) + " " + r.body + ">";
    return testing::dechunk(r.body).value_or("<cut>");
  }
  static Reply put(const std::string& vol, const std::string& path, const std::string& data) {
    return call("PUT", "/v1/volumes/" + vol + "/files/content?path=" + path, data);
  }
  std::string mountDir(const std::string& id) { return d_->stateDir() + "/volumes/mnt/" + id; }

  static constexpr const char* kKey2 = "vsk_volumes-second-tenant";
  static testing::Vesseld* d_;
};
testing::Vesseld* VolumesApiTest::d_ = nullptr;

TEST_F(VolumesApiTest, CreateListGetDeleteWithNamesSizesAndTheQuota) {
  Reply r = make("data", 64);
  ASSERT_EQ(r.status, 201) << r.body;
  std::string id = str(r.js(), "id");
  EXPECT_EQ(str(r.js(), "name"), "data");
  EXPECT_EQ(mountsAt("/volumes/mnt/" + id), 1);
  EXPECT_EQ(make("data", 64).status, 409);
  for (const char* bad : {"", "Data", "-x", "a/b", "a:b", "x y"})
    EXPECT_EQ(make(bad, 64).status, 400) << bad;
  EXPECT_EQ(make("tiny", 8).status, 400);     // below what ext4 needs
  EXPECT_EQ(make("huge", 1024).status, 400);  // over --max-volume-mib
  EXPECT_EQ(call("POST", "/v1/volumes", "{\"name\":\"x\"}").status, 400);
  EXPECT_EQ(call("POST", "/v1/volumes", "{\"name\":\"x\",\"size_mib\":64,\"z\":1}").status, 400);
  // 64 + 256 fits 400; 64 + 256 + 128 does not.
  ASSERT_EQ(make("big", 256).status, 201);
  Reply over = make("more", 128);
  EXPECT_EQ(over.status, 429) << over.body;
  EXPECT_THAT(over.body, HasSubstr("--tenant-max-volume-mib"));

  Reply got = call("GET", "/v1/volumes/data");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.js().at("size_mib").as_int64(), 64);
  EXPECT_TRUE(got.js().at("mounted").as_bool());
  EXPECT_GT(got.js().at("free_bytes").as_int64(), 32 << 20);
  int64_t used = got.js().at("used_bytes").as_int64();
  ASSERT_EQ(put("data", "/blob", std::string(4 << 20, 'b')).status, 201);
  EXPECT_GE(call("GET", "/v1/volumes/data").js().at("used_bytes").as_int64(), used + (4 << 20));
  EXPECT_EQ(call("GET", "/v1/volumes/nope").status, 404);
  EXPECT_EQ(call("GET", "/v1/volumes/Bad!").status, 400);
  // Another tenant sees none of them, by list or by name.
  EXPECT_EQ(call("GET", "/v1/volumes", "", kKey2).js().at("volumes").as_array().size(), 0u);
  EXPECT_EQ(call("GET", "/v1/volumes/data", "", kKey2).status, 404);
  EXPECT_EQ(call("GET", "/v1/volumes/data/files?path=/", "", kKey2).status, 404);
  EXPECT_EQ(call("DELETE", "/v1/volumes/data", "", kKey2).status, 404);
  EXPECT_EQ(make("data", 64).status, 409);
  EXPECT_EQ(call("GET", "/v1/volumes", "", "").status, 401);
  auto names = call("GET", "/v1/volumes").js().at("volumes").as_array();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(str(names[0], "name"), "big");

  ASSERT_EQ(call("DELETE", "/v1/volumes/data").status, 204);
  ASSERT_EQ(call("DELETE", "/v1/volumes/big").status, 204);
  EXPECT_EQ(call("DELETE", "/v1/volumes/data").status, 404);
  EXPECT_EQ(mountsAt("/volumes/mnt/" + id), 0);
  EXPECT_FALSE(fs::exists(d_->stateDir() + "/volumes/images/" + id + ".img"));
  EXPECT_FALSE(fs::exists(mountDir(id)));
}

TEST_F(VolumesApiTest, FilesStreamBothWaysAndStayInside) {
  ASSERT_EQ(make("files", 32).status, 201);
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4096);
  Reply w = put("files", "/a.bin", big);
  ASSERT_EQ(w.status, 201) << w.body;
  EXPECT_EQ(w.js().at("size").as_int64(), 3 << 20);
  EXPECT_EQ(content("files", "/a.bin"), big);
  ASSERT_EQ(call("POST", "/v1/volumes/files/files:mkdir", "{\"path\":\"/d/e\"}").status, 204);
  ASSERT_EQ(put("files", "/d/e/f.txt&mode=0600", "hi").status, 201);
  Reply l = call("GET", "/v1/volumes/files/files?path=/d/e");
  ASSERT_EQ(l.status, 200) << l.body;
  auto entries = l.js().at("entries").as_array();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(str(entries[0], "path"), "/d/e/f.txt");
  EXPECT_EQ(entries[0].at("mode").as_int64(), 0600);
  Reply root = call("GET", "/v1/volumes/files/files?path=/");
  ASSERT_EQ(root.status, 200);
  EXPECT_EQ(root.js().at("entries").as_array().size(), 3u);  // a.bin, d, lost+found
  EXPECT_EQ(call("GET", "/v1/volumes/files/files?path=/none").status, 404);
  EXPECT_EQ(call("DELETE", "/v1/volumes/files/files?path=/d").status, 409);
  EXPECT_EQ(call("DELETE", "/v1/volumes/files/files?path=/d&recursive=true").status, 204);
  EXPECT_EQ(call("GET", "/v1/volumes/files/files?path=/d").status, 404);
  EXPECT_EQ(call("GET", "/v1/volumes/files/files?path=/../..").status, 400);
  EXPECT_EQ(call("DELETE", "/v1/volumes/files/files?path=/").status, 400);
  // A link a guest made, out of the volume: never followed outside.
  std::string vol = str(call("GET", "/v1/volumes/files").js(), "id");
  fs::create_symlink(d_->stateDir(), mountDir(vol) + "/out");
  EXPECT_EQ(call("GET", "/v1/volumes/files/files/content?path=/out/dev-api-key").status, 400);
  EXPECT_EQ(put("files", "/out/planted", "x").status, 400);
  EXPECT_FALSE(fs::exists(d_->stateDir() + "/planted"));
  // Past the size: ENOSPC from ext4, and the old file is untouched.
  Reply full = put("files", "/a.bin", std::string(40 << 20, 'x'));
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_THAT(full.body, HasSubstr("full"));
  EXPECT_EQ(content("files", "/a.bin"), big);
  ASSERT_EQ(call("DELETE", "/v1/volumes/files").status, 204);
}

TEST_F(VolumesApiTest, SnapshotsKeepTheirMomentAndClonesAreTheirOwn) {
  ASSERT_EQ(make("src", 32).status, 201);
  ASSERT_EQ(put("src", "/f", "one").status, 201);
  Reply s = call("POST", "/v1/volumes/src:snapshot", "{\"name\":\"src-snap\"}");
  ASSERT_EQ(s.status, 201) << s.body;
  EXPECT_TRUE(s.js().at("read_only").as_bool());
  EXPECT_EQ(str(s.js(), "source_id"), str(call("GET", "/v1/volumes/src").js(), "id"));
  Reply c = call("POST", "/v1/volumes/src:clone", "{\"name\":\"src-clone\"}");
  ASSERT_EQ(c.status, 201) << c.body;
  EXPECT_FALSE(c.js().at("read_only").as_bool());
  ASSERT_EQ(put("src", "/f", "two").status, 201);
  EXPECT_EQ(content("src", "/f"), "two");
  EXPECT_EQ(content("src-snap", "/f"), "one");
  EXPECT_EQ(content("src-clone", "/f"), "one");
  ASSERT_EQ(put("src-clone", "/f", "three").status, 201);
  EXPECT_EQ(content("src", "/f"), "two");
  // A snapshot refuses every change, clearly; a clone of it is writable.
  Reply ro = put("src-snap", "/f", "no");
  EXPECT_EQ(ro.status, 409);
  EXPECT_THAT(ro.body, HasSubstr("read-only"));
  EXPECT_EQ(call("POST", "/v1/volumes/src-snap/files:mkdir", "{\"path\":\"/x\"}").status, 409);
  EXPECT_EQ(call("DELETE", "/v1/volumes/src-snap/files?path=/f").status, 409);
  ASSERT_EQ(call("POST", "/v1/volumes/src-snap:clone", "{\"name\":\"again\"}").status, 201);
  EXPECT_EQ(put("again", "/f", "four").status, 201);
  EXPECT_EQ(call("POST", "/v1/volumes/src:clone", "{\"name\":\"src\"}").status, 409);
  EXPECT_EQ(call("POST", "/v1/volumes/none:clone", "{\"name\":\"n\"}").status, 404);
  EXPECT_EQ(call("POST", "/v1/volumes/src:grow", "{}").status, 404);
  for (const char* v : {"src", "src-snap", "src-clone", "again"})
    EXPECT_EQ(call("DELETE", std::string("/v1/volumes/") + v).status, 204) << v;
}

// A volume a sandbox mounts (a volume_mounts row; sandboxes fill them in
// a later slice) is deleted only with force=true, and then nothing of it
// is left. A kill -9 loses nothing, and the restart mounts it once.
TEST_F(VolumesApiTest, MountedDeletesNeedForceAndKillNineLosesNothing) {
  ASSERT_EQ(make("kept", 32).status, 201);
  ASSERT_EQ(put("kept", "/f", "survives").status, 201);
  Reply v = make("used", 32);
  ASSERT_EQ(v.status, 201);
  std::string used = str(v.js(), "id");
  {
    auto db = store::openSqlite(d_->stateDir() + "/vessel.db");
    ASSERT_TRUE(db.ok()) << db.error().message();
    ASSERT_TRUE((*db)->insertVolumeMount({"sb-x", used, "/data", false}).ok());
  }
  Reply refused = call("DELETE", "/v1/volumes/used");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("force"));
  EXPECT_EQ(call("DELETE", "/v1/volumes/used?force=maybe").status, 400);
  ASSERT_EQ(call("DELETE", "/v1/volumes/used?force=true").status, 204);
  EXPECT_EQ(mountsAt("/volumes/mnt/" + used), 0);

  std::string kept = str(call("GET", "/v1/volumes/kept").js(), "id");
  d_->kill9();
  // An image the store does not know is set aside at the start, not deleted.
  const std::string images = d_->stateDir() + "/volumes/images/";
  fs::copy_file(images + kept + ".img", images + "vol-orphan0.img");
  EXPECT_EQ(mountsAt("/volumes/mnt/" + kept), 1) << "a killed vesseld leaves its mount";
  ASSERT_TRUE(d_->start()) << d_->log();
  EXPECT_EQ(mountsAt("/volumes/mnt/" + kept), 1) << "mounted twice";
  EXPECT_EQ(content("kept", "/f"), "survives");
  EXPECT_FALSE(fs::exists(images + "vol-orphan0.img"));
  EXPECT_TRUE(fs::exists(d_->stateDir() + "/volumes/orphans/vol-orphan0.img"));
  EXPECT_TRUE(call("GET", "/v1/volumes/kept").js().at("mounted").as_bool());
  ASSERT_EQ(call("DELETE", "/v1/volumes/kept").status, 204);
  EXPECT_EQ(mountsAt("/volumes/mnt/" + kept), 0);
}

// `vessel volume ...` against the daemon: what a user types.
TEST_F(VolumesApiTest, TheCliDrivesVolumesAndTheirFiles) {
  auto cli = [](std::vector<std::string> args) {
    args.insert(args.begin(), "volume");
    return testing::runCli(VESSEL_CLI_PATH, *d_, args);
  };
  testing::ScratchDir dir;
  const std::string local = dir.path() + "/in.txt", back = dir.path() + "/out.txt";
  std::ofstream(local) << "from the cli\n";
  auto r = cli({"create", "cli-vol", "--size", "32"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.last(), "cli-vol");
  EXPECT_EQ(cli({"create", "cli-vol", "--size", "32"}).code, 1);
  ASSERT_EQ(cli({"mkdir", "cli-vol", "/a/b"}).code, 0);
  r = cli({"put", "cli-vol", "/a/b/f.txt", local, "--mode", "0600"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = cli({"cat", "cli-vol", "/a/b/f.txt"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "from the cli\n");
  r = cli({"ls", "cli-vol", "/a/b"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("0600"));
  EXPECT_THAT(r.out, HasSubstr("f.txt"));
  ASSERT_EQ(cli({"snapshot", "cli-vol", "cli-snap"}).code, 0);
  ASSERT_EQ(cli({"clone", "cli-snap", "cli-clone"}).code, 0);
  r = cli({"put", "cli-snap", "/x", local});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("read-only"));
  EXPECT_EQ(cli({"cat", "cli-clone", "/a/b/f.txt"}).out, "from the cli\n");
  r = cli({"list", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.lines(), (std::vector<std::string>{"cli-clone", "cli-snap", "cli-vol"}));
  r = cli({"get", "cli-vol"});
  EXPECT_THAT(r.out, HasSubstr("\"used_bytes\""));
  EXPECT_EQ(cli({"rm", "cli-vol", "/a"}).code, 1);  // not empty
  ASSERT_EQ(cli({"rm", "cli-vol", "/a", "-r"}).code, 0);
  r = cli({"cat", "cli-vol", "/a/b/f.txt"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("open /a/b/f.txt: No such file"));
  for (const char* v : {"cli-vol", "cli-snap", "cli-clone"})
    EXPECT_EQ(cli({"delete", v}).code, 0) << v;
  EXPECT_EQ(cli({"list", "-q"}).out, "");
}

}  // namespace
}  // namespace vessel
