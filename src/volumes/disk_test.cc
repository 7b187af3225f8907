// Volumes on the host with the real thing: mkfs.ext4, loop devices and
// mounts (root only; skipped otherwise). Every test removes what it made.
#include "volumes/disk.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "os/command.h"
#include "volumes/files.h"
#include "volumes/volume_host.h"

namespace vessel::volumes {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string readAll(Fd fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// The mount options of the filesystem mounted at `dir` ("" for none).
std::string mountOptions(const std::string& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line, found;
  const std::string want = fs::canonical(dir).string();
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point, opts;
    if (f >> id >> parent >> dev >> root >> point >> opts && point == want) found = opts;
  }
  return found;
}

class VolumeDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (loop devices, mounts)";
    std::string tmpl = "/tmp/voldisk-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto h = VolumeHost::open({dir_ + "/volumes"});
    ASSERT_TRUE(h.ok()) << h.error().message();
    host_ = std::move(*h);
  }
  void TearDown() override {
    host_.reset();  // unmounts what a failed test left
    if (!dir_.empty()) {
      for (const auto& e : fs::directory_iterator(dir_ + "/volumes/mnt", ec_))
        ::umount2(e.path().c_str(), MNT_DETACH);
      fs::remove_all(dir_, ec_);
    }
  }
  Result<VolumeFiles> files(const std::string& id, bool ro = false) {
    auto root = host_->root(id);
    if (!root.ok()) return std::move(root).error();
    return VolumeFiles::open(*root, ro);
  }
  Status put(const std::string& id, const std::string& path, const std::string& data) {
    VESSEL_ASSIGN_OR_RETURN(auto v, files(id));
    VESSEL_ASSIGN_OR_RETURN(auto w, v.write(path, 0644));
    VESSEL_TRY(w.append(data));
    VESSEL_TRY(w.commit());
    return okStatus();
  }
  std::string get(const std::string& id, const std::string& path) {
    auto v = files(id);
    if (!v.ok()) return "<" + v.error().message() + ">";
    auto f = v->openRead(path);
    if (!f.ok()) return "<" + f.error().message() + ">";
    return readAll(std::move(*f));
  }
  std::string dir_;
  std::error_code ec_;
  std::unique_ptr<VolumeHost> host_;
};

TEST_F(VolumeDiskTest, CreateMountsASparseExt4OfItsSize) {
  ASSERT_TRUE(host_->create("vol-a", 256).ok());
  struct stat st {};
  ASSERT_EQ(::stat(host_->imagePath("vol-a").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 256 << 20);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{32} << 20) << "not sparse";
  std::string opts = mountOptions(host_->mountDir("vol-a"));
  for (const char* o : {"nosuid", "nodev", "noexec"})
    EXPECT_NE(opts.find(o), std::string::npos) << opts;
  struct stat root {};
  ASSERT_EQ(::stat(host_->mountDir("vol-a").c_str(), &root), 0);
  EXPECT_EQ(root.st_uid, 0u);
  EXPECT_EQ(root.st_mode & 07777, 0755u);
  auto u = host_->usage("vol-a");
  ASSERT_TRUE(u.ok());
  EXPECT_GT(u->total_bytes, uint64_t{200} << 20);
  EXPECT_LE(u->total_bytes, uint64_t{256} << 20);
  EXPECT_EQ(host_->create("vol-a", 64).error().code(), Code::kAlreadyExists);
  EXPECT_EQ(host_->imageIds(), std::vector<std::string>{"vol-a"});
}

TEST_F(VolumeDiskTest, WritingPastTheSizeIsENOSPC) {
  ASSERT_TRUE(host_->create("vol-full", 32).ok());
  auto v = files("vol-full");
  ASSERT_TRUE(v.ok());
  {
    auto w = v->write("/big", 0644);
    ASSERT_TRUE(w.ok());
    const std::string mib(1 << 20, 'x');
    Status s = okStatus();
    for (int i = 0; i < 48 && s.ok(); ++i) s = w->append(mib);
    ASSERT_FALSE(s.ok()) << "48 MiB fit in a 32 MiB volume";
    EXPECT_EQ(s.error().code(), Code::kResourceExhausted) << s.error().message();
  }  // the failed write's temporary goes with it
  std::vector<FileInfo> l = v->list("/").value();
  for (const auto& f : l) EXPECT_EQ(f.name.find(".vessel-write"), std::string::npos) << f.name;
  struct stat st {};
  ASSERT_EQ(::stat(host_->imagePath("vol-full").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 32 << 20);
}

TEST_F(VolumeDiskTest, ASnapshotKeepsItsMomentAndAcloneIsItsOwn) {
  ASSERT_TRUE(host_->create("vol-src", 64).ok());
  ASSERT_TRUE(put("vol-src", "/a.txt", "one").ok());
  ASSERT_TRUE(host_->copy("vol-src", "vol-snap", true).ok());
  ASSERT_TRUE(host_->copy("vol-src", "vol-clone", false).ok());
  ASSERT_TRUE(put("vol-src", "/a.txt", "two").ok());
  // The source is writable again after the freeze, and changed.
  EXPECT_EQ(get("vol-src", "/a.txt"), "two");
  EXPECT_EQ(get("vol-snap", "/a.txt"), "one");
  EXPECT_EQ(get("vol-clone", "/a.txt"), "one");
  ASSERT_TRUE(put("vol-clone", "/a.txt", "three").ok());
  EXPECT_EQ(get("vol-clone", "/a.txt"), "three");
  EXPECT_EQ(get("vol-src", "/a.txt"), "two");
  // The snapshot is read-only in the kernel too, not only in VolumeFiles.
  EXPECT_EQ(mountOptions(host_->mountDir("vol-snap")).rfind("ro,", 0), 0u);
  std::ofstream direct(host_->mountDir("vol-snap") + "/b.txt");
  EXPECT_FALSE(direct.is_open());
  auto v = files("vol-snap", true);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->write("/a.txt", 0644).error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(host_->copy("vol-none", "vol-x", true).error().code(), Code::kUnavailable);
  EXPECT_FALSE(fs::exists(host_->imagePath("vol-x")));
}

TEST_F(VolumeDiskTest, RemoveLeavesNoLoopDeviceMountOrImage) {
  ASSERT_TRUE(host_->create("vol-gone", 32).ok());
  auto dev = mountedDevice(host_->mountDir("vol-gone"));
  ASSERT_TRUE(dev.ok() && !dev->empty());
  EXPECT_EQ(loopBackingFile(*dev), fs::canonical(host_->imagePath("vol-gone")).string());
  // A file held open does not keep the volume: it is detached.
  auto held = Fd::open(host_->mountDir("vol-gone") + "/held", O_WRONLY | O_CREAT, 0600);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(host_->remove("vol-gone").ok());
  EXPECT_EQ(mountedDevice(host_->mountDir("vol-gone")).value_or("?"), "");
  EXPECT_FALSE(fs::exists(host_->imagePath("vol-gone")));
  EXPECT_FALSE(fs::exists(host_->mountDir("vol-gone")));
  held->reset();  // the lazy unmount completes, and autoclear detaches the loop device
  bool detached = false;
  for (int i = 0; i < 100 && !detached; ++i) {
    detached = loopBackingFile(*dev).find("vol-gone") == std::string::npos;
    if (!detached) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(detached) << *dev << " still backs " << loopBackingFile(*dev);
  EXPECT_TRUE(host_->remove("vol-gone").ok());  // gone already: fine
  EXPECT_EQ(host_->root("vol-gone").error().code(), Code::kUnavailable);
}

// Writers wait while a volume is frozen, and go on once the freeze goes,
// whatever way it goes.
TEST_F(VolumeDiskTest, AFreezeHoldsWritersUntilItIsThawed) {
  ASSERT_TRUE(host_->create("vol-frozen", 32).ok());
  const std::string dir = host_->mountDir("vol-frozen");
  std::atomic<bool> done{false};
  std::thread writer;
  {
    auto frozen = FrozenFs::freeze(dir);
    ASSERT_TRUE(frozen.ok()) << frozen.error().message();
    writer = std::thread([&] {
      std::ofstream(dir + "/during") << "x";
      done = true;
    });
    // Nothing to wait for but time: the write must not get through.
    std::this_thread::sleep_for(300ms);
    EXPECT_FALSE(done) << "a write got through a frozen filesystem";
  }
  writer.join();
  EXPECT_TRUE(done);
  EXPECT_TRUE(fs::exists(dir + "/during"));
  EXPECT_EQ(FrozenFs::freeze(dir + "/nope").error().code(), Code::kNotFound);
}

// What the store does not know is put aside, never deleted; a copy cut
// short is removed when the host opens.
TEST_F(VolumeDiskTest, OrphansAreSetAsideAndPartialCopiesGo) {
  ASSERT_TRUE(host_->create("vol-orphan", 32).ok());
  ASSERT_TRUE(put("vol-orphan", "/f", "keep me").ok());
  EXPECT_EQ(host_->setAside("vol-orphan").error().code(), Code::kFailedPrecondition);  // mounted
  host_.reset();
  std::ofstream(dir_ + "/volumes/images/vol-cut.img.part") << "half";
  host_ = std::move(*VolumeHost::open({dir_ + "/volumes"}));
  EXPECT_FALSE(fs::exists(dir_ + "/volumes/images/vol-cut.img.part"));
  EXPECT_EQ(host_->imageIds(), std::vector<std::string>{"vol-orphan"});
  ASSERT_TRUE(host_->setAside("vol-orphan").ok());
  EXPECT_TRUE(host_->imageIds().empty());
  EXPECT_FALSE(fs::exists(host_->mountDir("vol-orphan")));
  const std::string kept = dir_ + "/volumes/orphans/vol-orphan.img";
  ASSERT_TRUE(fs::exists(kept));
  EXPECT_EQ(fs::file_size(kept), uint64_t{32} << 20);
}

TEST_F(VolumeDiskTest, RestoreAdoptsAMountLeftBehindAndRefusesAForeignOne) {
  ASSERT_TRUE(host_->create("vol-kept", 32).ok());
  ASSERT_TRUE(put("vol-kept", "/f", "kept").ok());
  host_.reset();  // a clean stop unmounts
  EXPECT_EQ(mountedDevice(dir_ + "/volumes/mnt/vol-kept").value_or("?"), "");
  // What a vesseld killed with the volume mounted leaves behind.
  auto m = os::runCommand({"mount", "-o", "loop,nosuid,nodev,noexec",
                           dir_ + "/volumes/images/vol-kept.img", dir_ + "/volumes/mnt/vol-kept"});
  ASSERT_TRUE(m.ok()) << m.error().message();
  auto h = VolumeHost::open({dir_ + "/volumes"});
  ASSERT_TRUE(h.ok());
  host_ = std::move(*h);
  ASSERT_TRUE(host_->restore("vol-kept", false).ok());
  EXPECT_EQ(get("vol-kept", "/f"), "kept");
  int mounts = 0;
  {
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) mounts += line.find("/mnt/vol-kept ") != std::string::npos;
  }
  EXPECT_EQ(mounts, 1) << "mounted twice";
  // A restart with nothing mounted mounts it again.
  host_.reset();
  host_ = std::move(*VolumeHost::open({dir_ + "/volumes"}));
  ASSERT_TRUE(host_->restore("vol-kept", false).ok());
  EXPECT_EQ(get("vol-kept", "/f"), "kept");
  // Someone else's filesystem where a volume would go is refused.
  ASSERT_TRUE(host_->create("vol-other", 32).ok());
  host_.reset();
  const std::string spot = dir_ + "/volumes/mnt/vol-other";
  ASSERT_EQ(::mount("tmpfs", spot.c_str(), "tmpfs", 0, "size=1m"), 0);
  host_ = std::move(*VolumeHost::open({dir_ + "/volumes"}));
  EXPECT_EQ(host_->restore("vol-other", false).error().code(), Code::kFailedPrecondition);
  ::umount2(spot.c_str(), 0);
  EXPECT_EQ(host_->restore("vol-none", false).error().code(), Code::kNotFound);
}

}  // namespace
}  // namespace vessel::volumes
