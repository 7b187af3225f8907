// Volumes in sandboxes (issue 27, the first guest slice): a real vesseld
// creating real guests that mount volumes at create, each mount served by
// a confined vessel-volume-server over the agent channel; every reply
// checked against api/openapi.yaml. A file written in one sandbox is read
// in the next after the first is deleted, and through the files API; two
// sandboxes at once each read the other's file; a read-only mount refuses
// writes in the guest; a full volume is ENOSPC in the guest; a missing or
// another tenant's volume is refused before anything boots; a forced
// delete of a mounted volume ends its mounts, and a sandbox's delete its
// servers; a pause keeps the mounts with their open files, a fork's copy
// mounts the same volume, a vesseld killed mid-write loses no line written
// and mounts anew. Root only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <sstream>

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

// A pause with memory quiets the mounts and holds their servers; the
// resumed guest's mounts carry on with them: a process with a file open on
// the volume and its working directory in it writes on through both.
TEST_F(VolumesGuestTest, PauseAndResumeKeepTheMountWithAFileHeldOpen) {
  std::string why;
  std::string id = sandbox({mount("shared", "/data")}, &why);
  ASSERT_FALSE(id.empty()) << why << "\n" << d_->log();
  // In the background, detached from the exec: fd 3 stays open on the
  // volume and the cwd in it until /tmp/go appears.
  EXPECT_EQ(d_->sh(id,
                   "mkdir -p /data/held && cd /data/held && "
                   "(exec 3>>log.txt; echo before >&3; "
                   "while [ ! -e /tmp/go ]; do sleep 0.1; done; "
                   "echo after >&3; exec 3>&-; cat log.txt > /tmp/seen; touch /tmp/done) "
                   "</dev/null >/dev/null 2>&1 &"),
            "");
  for (int i = 0; i < 100 && content("shared", "/held/log.txt") != "before\n"; ++i)
    ::usleep(100 * 1000);
  ASSERT_EQ(content("shared", "/held/log.txt"), "before\n");
  Reply p = call("POST", "/v1/sandboxes/" + id + ":pause");
  ASSERT_EQ(p.status, 202) << p.body;
  ASSERT_EQ(d_->finish(str(p.js().at("operation"), "id")), "done") << d_->log();
  EXPECT_EQ(fileServersSettled(mntDir(), 1), 1);  // held for the resume
  Reply r = call("POST", "/v1/sandboxes/" + id + ":resume");
  ASSERT_EQ(r.status, 202) << r.body;
  ASSERT_EQ(d_->finish(str(r.js().at("operation"), "id")), "done") << d_->log();
  std::string seen = d_->sh(id,
                            "touch /tmp/go; for i in $(seq 100); do [ -e /tmp/done ] && break; "
                            "sleep 0.1; done; cat /tmp/seen");
  EXPECT_EQ(seen, "before\nafter\n") << d_->log();
  EXPECT_EQ(content("shared", "/held/log.txt"), "before\nafter\n");
  EXPECT_EQ(d_->sh(id, "echo new > /data/held/new.txt && cat /data/held/new.txt"), "new\n");
  EXPECT_EQ(fileServers(mntDir()), 1);
  ASSERT_TRUE(d_->deleteSandbox(id));
  EXPECT_EQ(fileServersSettled(mntDir(), 0), 0);
}

// A fork's copies mount the volumes their parent mounts, each with a
// server of its own; the parent's mount works on after the fork.
TEST_F(VolumesGuestTest, AForksCopyMountsTheSameVolume) {
  std::string why;
  std::string parent = sandbox({mount("shared", "/data")}, &why);
  ASSERT_FALSE(parent.empty()) << why << "\n" << d_->log();
  EXPECT_EQ(d_->sh(parent, "echo from parent > /data/fork.txt"), "");
  Reply f = call("POST", "/v1/sandboxes/" + parent + ":fork", R"({"count":1})");
  ASSERT_EQ(f.status, 202) << f.body;
  ASSERT_EQ(d_->finish(str(f.js().at("operation"), "id")), "done") << d_->log();
  std::string copy = str(f.js().at("sandboxes").as_array().at(0), "id");
  EXPECT_EQ(d_->sh(copy, "cat /data/fork.txt"), "from parent\n") << d_->log();
  EXPECT_EQ(d_->sh(copy, "echo from copy > /data/copy.txt"), "");
  EXPECT_EQ(d_->sh(parent, "cat /data/copy.txt"), "from copy\n");
  EXPECT_EQ(d_->sh(parent, "echo still > /data/after.txt && cat /data/after.txt"), "still\n");
  EXPECT_EQ(fileServers(mntDir()), 2);
  ASSERT_TRUE(d_->deleteSandbox(copy));
  EXPECT_EQ(d_->sh(parent, "cat /data/fork.txt"), "from parent\n");
  ASSERT_TRUE(d_->deleteSandbox(parent));
  EXPECT_EQ(fileServersSettled(mntDir(), 0), 0);
}

// "volumes": "clone": the copy mounts a clone of the parent's volume made
// while the parent was quiet: it starts with the parent's files, and what
// either writes afterwards the other does not see. The clone outlives the
// copy, as any volume does.
TEST_F(VolumesGuestTest, AForksCopyWithClonedVolumesWritesItsOwn) {
  std::string why;
  std::string parent = sandbox({mount("shared", "/data")}, &why);
  ASSERT_FALSE(parent.empty()) << why << "\n" << d_->log();
  EXPECT_EQ(d_->sh(parent, "echo before the fork > /data/cloned.txt"), "");
  Reply f = call("POST", "/v1/sandboxes/" + parent + ":fork", R"({"count":1,"volumes":"clone"})");
  ASSERT_EQ(f.status, 202) << f.body;
  ASSERT_EQ(d_->finish(str(f.js().at("operation"), "id")), "done") << d_->log();
  std::string copy = str(f.js().at("sandboxes").as_array().at(0), "id");
  std::string clone = "shared-" + copy;
  EXPECT_EQ(d_->sh(copy, "cat /data/cloned.txt"), "before the fork\n") << d_->log();
  EXPECT_EQ(d_->sh(copy, "echo copy > /data/cloned.txt"), "");
  EXPECT_EQ(d_->sh(parent, "echo parent > /data/only-parent.txt; cat /data/cloned.txt"),
            "before the fork\n");
  EXPECT_EQ(d_->sh(copy, "test -e /data/only-parent.txt && echo seen || echo unseen"), "unseen\n");
  EXPECT_EQ(content(clone, "/cloned.txt"), "copy\n");
  EXPECT_EQ(content("shared", "/cloned.txt"), "before the fork\n");
  Reply got = call("GET", "/v1/volumes/" + clone);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(str(got.js(), "source_id"), str(call("GET", "/v1/volumes/shared").js(), "id"));
  EXPECT_EQ(call("DELETE", "/v1/volumes/" + clone).status, 409);  // mounted by the copy
  ASSERT_TRUE(d_->deleteSandbox(copy));
  EXPECT_EQ(call("DELETE", "/v1/volumes/" + clone).status, 204);
  ASSERT_TRUE(d_->deleteSandbox(parent));
  EXPECT_EQ(call("DELETE", "/v1/volumes/shared/files?path=/only-parent.txt").status, 204);
  EXPECT_EQ(fileServersSettled(mntDir(), 0), 0);
}

// A template made from a sandbox expects its volumes: a create from it
// naming none mounts them where the sandbox had them (by name: the volume
// as it is now), and is refused, saying which, once one is gone.
TEST_F(VolumesGuestTest, ATemplateFromASandboxExpectsItsVolumes) {
  ASSERT_EQ(make("tmplvol", 16).status, 201);
  std::string why;
  std::string id = sandbox({mount("tmplvol", "/work")}, &why);
  ASSERT_FALSE(id.empty()) << why << "\n" << d_->log();
  EXPECT_EQ(d_->sh(id, "echo at fork > /work/t.txt"), "");
  Reply f = call("POST", "/v1/sandboxes/" + id + ":fork", R"({"template":"withvol"})");
  ASSERT_EQ(f.status, 202) << f.body;
  ASSERT_EQ(d_->finish(str(f.js().at("operation"), "id")), "done") << d_->log();
  EXPECT_EQ(d_->sh(id, "echo later > /work/t.txt"), "");
  std::string from = d_->createSandbox(R"({"template":"withvol"})", &why);
  ASSERT_FALSE(from.empty()) << why << "\n" << d_->log();
  EXPECT_EQ(d_->sh(from, "cat /work/t.txt"), "later\n") << d_->log();
  EXPECT_EQ(d_->sh(from, "echo from template > /work/u.txt"), "");
  EXPECT_EQ(content("tmplvol", "/u.txt"), "from template\n");
  ASSERT_TRUE(d_->deleteSandbox(from));
  ASSERT_TRUE(d_->deleteSandbox(id));
  EXPECT_EQ(call("DELETE", "/v1/volumes/tmplvol").status, 204);
  Reply refused = call("POST", "/v1/sandboxes", R"({"template":"withvol"})");
  EXPECT_EQ(refused.status, 404) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("template 'withvol' expects volume 'tmplvol'"));
  EXPECT_EQ(call("DELETE", "/v1/templates/withvol").status, 204);
  EXPECT_EQ(fileServersSettled(mntDir(), 0), 0);
}

// vesseld killed (-9) while a guest appends to a file on a volume: the
// restarted vesseld takes the sandbox over and mounts its volume anew. The
// file holds every line the old server wrote, whole and in order, and the
// guest writes on through the new mount.
TEST_F(VolumesGuestTest, KillNineDuringWritesLosesNothingWrittenAndMountsAnew) {
  std::string why;
  std::string id = sandbox({mount("shared", "/data")}, &why);
  ASSERT_FALSE(id.empty()) << why << "\n" << d_->log();
  EXPECT_EQ(d_->sh(id,
                   "(i=0; while echo line-$i >> /data/k.txt; do i=$((i+1)); done) "
                   "</dev/null >/dev/null 2>&1 &"),
            "");
  for (int i = 0; i < 100 && content("shared", "/k.txt").size() < 200; ++i) ::usleep(100 * 1000);
  d_->kill9();
  ASSERT_TRUE(d_->start()) << d_->log();
  // The writer stops when its session is aborted (a line cut there fails
  // whole: echo's one write either reached the server or did not).
  std::string after = d_->sh(id, "sleep 1; echo more >> /data/k.txt && tail -n 1 /data/k.txt");
  EXPECT_EQ(after, "more\n") << d_->log();
  std::string all = content("shared", "/k.txt");
  ASSERT_GE(all.size(), 200u) << all.substr(0, 200);
  std::istringstream lines(all);
  std::string line;
  int n = 0;
  bool ordered = true;
  while (std::getline(lines, line) && line != "more") {
    if (line != "line-" + std::to_string(n)) ordered = false;
    ++n;
  }
  EXPECT_TRUE(ordered) << "line " << n << ": " << line;
  EXPECT_EQ(line, "more");
  EXPECT_GT(n, 10);
  ASSERT_TRUE(d_->deleteSandbox(id));
  EXPECT_EQ(fileServersSettled(mntDir(), 0), 0);
}

// A guest reaches the volumes mounted into it and nothing else: another
// sandbox's volume is not there, a symbolic link it writes is text the
// files API never follows, a device node is refused by the server.
TEST_F(VolumesGuestTest, AGuestReachesOnlyTheVolumesMountedIntoIt) {
  std::string why;
  std::string a = sandbox({mount("shared", "/data")}, &why);
  ASSERT_FALSE(a.empty()) << why << "\n" << d_->log();
  std::string b = sandbox({mount("small", "/data")}, &why);
  ASSERT_FALSE(b.empty()) << why << "\n" << d_->log();
  std::string none = d_->createSandbox("{}", &why);
  ASSERT_FALSE(none.empty()) << why;
  EXPECT_EQ(d_->sh(b, "echo mine > /data/b-only.txt"), "");
  EXPECT_EQ(d_->sh(a, "test -e /data/b-only.txt && echo reached || echo absent"), "absent\n");
  EXPECT_EQ(d_->sh(none, "grep -c fuse /proc/mounts; ls /data 2>&1 | grep -c 'No such'"), "0\n1\n");
  // The link resolves in the guest's own kernel (to the guest's root); the
  // files API shows it as a link and follows it nowhere.
  EXPECT_EQ(d_->sh(a, "ln -sf / /data/root-link && ls /data/root-link/ | grep -c '^proc$'"), "1\n");
  Reply via = call("GET", "/v1/volumes/shared/files/content?path=/root-link/etc/hostname");
  EXPECT_EQ(via.status, 400) << via.body;
  // Device nodes are refused whatever the guest's root may do.
  EXPECT_THAT(d_->sh(a, "mknod /data/loop b 7 0 2>&1; echo rc=$?"), HasSubstr("rc=1"));
  Reply list = call("GET", "/v1/volumes/shared/files?path=/");
  EXPECT_THAT(list.body, Not(HasSubstr("\"loop\"")));
  EXPECT_EQ(call("DELETE", "/v1/volumes/shared/files?path=/root-link").status, 204);
  EXPECT_EQ(call("DELETE", "/v1/volumes/small/files?path=/b-only.txt").status, 204);
  for (const auto& id : {a, b, none}) ASSERT_TRUE(d_->deleteSandbox(id));
}

// A snapshot of a volume a guest is writing keeps its moment: the guest
// changes the file after it, the snapshot (mounted read-only in another
// sandbox, and through the API) still has the old one.
TEST_F(VolumesGuestTest, ASnapshotOfAMountedVolumeKeepsItsMoment) {
  std::string why;
  std::string id = sandbox({mount("shared", "/data")}, &why);
  ASSERT_FALSE(id.empty()) << why << "\n" << d_->log();
  EXPECT_EQ(d_->sh(id, "echo v1 > /data/moment.txt && sync"), "");
  Reply snap = call("POST", "/v1/volumes/shared:snapshot", R"({"name":"moment"})");
  ASSERT_EQ(snap.status, 201) << snap.body;
  EXPECT_EQ(d_->sh(id, "echo v2 > /data/moment.txt && cat /data/moment.txt"), "v2\n");
  EXPECT_EQ(content("moment", "/moment.txt"), "v1\n");
  std::string reader = sandbox({mount("moment", "/snap", true)}, &why);
  ASSERT_FALSE(reader.empty()) << why << "\n" << d_->log();
  EXPECT_EQ(d_->sh(reader, "cat /snap/moment.txt"), "v1\n");
  EXPECT_THAT(d_->sh(reader, "echo x > /snap/moment.txt 2>&1; echo rc=$?"), HasSubstr("rc=1"));
  ASSERT_TRUE(d_->deleteSandbox(reader));
  ASSERT_TRUE(d_->deleteSandbox(id));
  EXPECT_EQ(call("DELETE", "/v1/volumes/moment").status, 204);
  EXPECT_EQ(content("shared", "/moment.txt"), "v2\n");
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
