// The qcow2 header parser on real qemu-img images, and on real headers
// edited the way a QEMU that a guest took over could edit its overlay's.
#include "hypervisor/qemu/qcow2_header.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "base/child_process.h"
#include "base/fd.h"

namespace vessel::hypervisor::qemu {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class Qcow2HeaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/vessel-qcow2-XXXXXX";
    dir_ = ::mkdtemp(t);
    base_ = dir_ + "/base.raw";
    std::ofstream(base_).put('x');
    fs::resize_file(base_, 1 << 20);
  }
  void TearDown() override { fs::remove_all(dir_); }
  bool qemuImg(std::vector<std::string> args) {
    SpawnOptions so;
    so.argv = {"qemu-img"};
    so.argv.insert(so.argv.end(), args.begin(), args.end());
    so.fds = {{2, 2}};  // qemu-img's reason for a refusal, in the test's log
    auto c = ChildProcess::spawn(so);
    if (!c.ok()) return false;
    auto st = c->waitFor(std::chrono::seconds(30));
    return st.ok() && st->success();
  }
  // A real overlay on base_, made as vesseld makes them; `extra` are -o options.
  std::string overlay(const std::string& name, const std::string& extra = "") {
    std::string p = dir_ + "/" + name;
    std::vector<std::string> a = {"create", "-q", "-f", "qcow2", "-F", "raw", "-b", base_};
    if (!extra.empty()) a.insert(a.end(), {"-o", extra});
    a.push_back(p);
    EXPECT_TRUE(qemuImg(a)) << name;
    return p;
  }
  static std::string bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str().substr(0, 65536);
  }
  static void put32(std::string& b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>(v >> (24 - 8 * i));
  }
  static void put64(std::string& b, size_t at, uint64_t v) {
    put32(b, at, static_cast<uint32_t>(v >> 32));
    put32(b, at + 4, static_cast<uint32_t>(v));
  }
  static uint32_t get32(const std::string& b, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(b[at + i]);
    return v;
  }
  // A header of a real overlay with its backing name replaced by `name`
  // (written at 4096, inside the first cluster, as a rewriting QEMU could).
  std::string withBacking(const std::string& name) {
    std::string b = bytes(overlay("o.qcow2"));
    b.replace(4096, name.size(), name);
    put64(b, 8, 4096);
    put32(b, 16, static_cast<uint32_t>(name.size()));
    return b;
  }
  std::string dir_, base_;
};

TEST_F(Qcow2HeaderTest, VesseldsOverlayParsesAndNamesItsBacking) {
  std::string o = overlay("o.qcow2");
  auto h = readQcow2Header(o);
  ASSERT_TRUE(h.ok()) << h.error().message();
  EXPECT_EQ(h->version, 3u);
  EXPECT_EQ(h->backing_file, base_);
  EXPECT_EQ(h->backing_format, "raw");
  EXPECT_EQ(h->virtual_size, 1u << 20);
  EXPECT_TRUE(checkQcow2Overlay(o, base_, "raw").ok());
  EXPECT_TRUE(checkQcow2Overlay(o, base_, "raw", 1 << 20).ok());
  auto big = checkQcow2Overlay(o, base_, "raw", (1 << 20) - 1);
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.error().message(), HasSubstr("virtual size"));
  // Any other expected name, or none, is refused: the comparison is exact.
  for (const std::string& want : {dir_ + "/other.raw", dir_ + "//base.raw", std::string()}) {
    auto s = checkQcow2Overlay(o, want, "raw");
    ASSERT_FALSE(s.ok()) << want;
    EXPECT_THAT(s.error().message(), HasSubstr("tampered")) << want;
  }
  EXPECT_FALSE(checkQcow2Overlay(o, base_, "qcow2").ok());
}

TEST_F(Qcow2HeaderTest, OtherLayoutsQemuMakesAreAccepted) {
  // v2, extended L2 with big clusters, zstd with lazy refcounts, tiny clusters.
  for (const char* opts : {"compat=0.10", "extended_l2=on,cluster_size=128k",
                           "compression_type=zstd,lazy_refcounts=on", "cluster_size=512"}) {
    auto h = readQcow2Header(overlay("x.qcow2", opts));
    ASSERT_TRUE(h.ok()) << opts << ": " << h.error().message();
    EXPECT_EQ(h->backing_file, base_) << opts;
    EXPECT_EQ(h->backing_format, "raw") << opts;
    fs::remove(dir_ + "/x.qcow2");
  }
  // Persistent dirty bitmaps live inside the image.
  std::string p = dir_ + "/bitmaps.qcow2";
  ASSERT_TRUE(qemuImg({"create", "-q", "-f", "qcow2", p, "1M"}));
  ASSERT_TRUE(qemuImg({"bitmap", "--add", p, "b0"}));
  auto h = readQcow2Header(p);
  ASSERT_TRUE(h.ok()) << h.error().message();
  EXPECT_TRUE(h->backing_file.empty());
  EXPECT_TRUE(checkQcow2Overlay(p, "", "raw").ok());
}

TEST_F(Qcow2HeaderTest, WhatWouldOpenAnotherFileIsRefused) {
  std::string df = dir_ + "/data.qcow2", luks = dir_ + "/luks.qcow2", js = dir_ + "/json.qcow2",
              nbd = dir_ + "/nbd.qcow2";
  ASSERT_TRUE(qemuImg({"create", "-q", "-f", "qcow2", "-o",
                       "data_file=" + dir_ + "/data.raw,data_file_raw=on", df, "1M"}));
  // qemu-img times its LUKS key derivation by the thread's CPU time, and a
  // busy host can charge it none ("Unable to get accurate CPU usage"): the
  // image is only this test's input, so its making is tried again.
  bool made = false;
  for (int i = 0; i < 5 && !made; ++i)
    made = qemuImg({"create", "-q", "-f", "qcow2", "--object", "secret,id=s0,data=pw", "-o",
                    "encrypt.format=luks,encrypt.key-secret=s0,encrypt.iter-time=10", luks, "1M"});
  ASSERT_TRUE(made);
  ASSERT_TRUE(qemuImg({"create", "-q", "-f", "qcow2", "-u", "-F", "raw", "-b",
                       R"(json:{"driver":"raw","file":{"driver":"file","filename":"/etc/shadow"}})",
                       js, "1M"}));
  ASSERT_TRUE(qemuImg({"create", "-q", "-f", "qcow2", "-u", "-F", "raw", "-b",
                       "nbd://127.0.0.1:10809/x", nbd, "1M"}));
  std::vector<std::pair<std::string, std::string>> cases = {{df, "external data file"},
                                                            {luks, "encrypted"},
                                                            {js, "names a protocol"},
                                                            {nbd, "names a protocol"}};
  for (const auto& [path, why] : cases) {
    auto h = readQcow2Header(path);
    ASSERT_FALSE(h.ok()) << path;
    EXPECT_THAT(h.error().message(), HasSubstr(why)) << path;
    EXPECT_FALSE(checkQcow2Overlay(path, "", "raw").ok()) << path;
  }
}

TEST_F(Qcow2HeaderTest, EditedHeadersAreRefused) {
  std::string real = bytes(overlay("o.qcow2"));
  ASSERT_TRUE(parseQcow2Header(real).ok());
  const uint32_t header_len = get32(real, 100);
  ASSERT_EQ(get32(real, header_len), 0xe2792acau) << "the backing format extension comes first";
  struct Case {
    std::string name, why;
    std::function<void(std::string&)> edit;
  };
  std::vector<Case> cases = {
      {"bad magic", "magic", [](std::string& b) { b[3] = 0; }},
      {"version 4", "version", [](std::string& b) { put32(b, 4, 4); }},
      {"encrypted (aes)", "encrypted", [](std::string& b) { put32(b, 32, 1); }},
      {"cluster bits 22", "cluster bits", [](std::string& b) { put32(b, 20, 22); }},
      {"corrupt", "corrupt", [](std::string& b) { put64(b, 72, 2); }},
      {"data file bit", "external data file", [](std::string& b) { put64(b, 72, 4); }},
      {"unknown incompatible", "unknown incompatible",
       [](std::string& b) { put64(b, 72, 1 << 5); }},
      {"raw data file bit", "external data file", [](std::string& b) { put64(b, 88, 2); }},
      {"unknown autoclear", "unknown autoclear", [](std::string& b) { put64(b, 88, 1 << 7); }},
      {"unknown extension", "unknown header extension",
       [&](std::string& b) { put32(b, header_len, 0x12345678); }},
      {"data file extension", "external data file",
       [&](std::string& b) { put32(b, header_len, 0x44415441); }},
      {"crypto extension", "encrypted", [&](std::string& b) { put32(b, header_len, 0x0537be77); }},
      {"extension past its region", "runs past",
       [&](std::string& b) { put32(b, header_len + 4, 60000); }},
      {"backing offset past the cluster", "backing file offset",
       [](std::string& b) { put64(b, 8, 65537); }},
      {"backing name too long", "too long", [](std::string& b) { put32(b, 16, 1024); }},
      {"header length too small", "header length", [](std::string& b) { put32(b, 100, 96); }},
      {"compression type 7", "compression type", [](std::string& b) { b[104] = 7; }},
  };
  for (const auto& c : cases) {
    std::string b = real;
    c.edit(b);
    auto h = parseQcow2Header(b);
    ASSERT_FALSE(h.ok()) << c.name;
    EXPECT_THAT(h.error().message(), HasSubstr(c.why)) << c.name;
  }
  // Backing names a taken-over QEMU would write.
  for (const std::string& name :
       {std::string(R"(json:{"file":{"driver":"file","filename":"/etc/shadow"}})"),
        std::string("nbd:unix:/run/x.sock"), std::string("file:/etc/shadow"),
        std::string("/etc/sha\0dow", 12)}) {
    auto h = parseQcow2Header(withBacking(name));
    EXPECT_FALSE(h.ok()) << name;
  }
  // A plain path parses (the exact comparison refuses it: see above).
  auto h = parseQcow2Header(withBacking("/etc/shadow"));
  ASSERT_TRUE(h.ok()) << h.error().message();
  EXPECT_EQ(h->backing_file, "/etc/shadow");
  // Without its backing format extension QEMU would probe the backing
  // file's format: the overlay check refuses it.
  std::string nofmt = real;
  put32(nofmt, header_len, 0x6803f857);  // now a feature-name table
  auto parsed = parseQcow2Header(nofmt);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  EXPECT_TRUE(parsed->backing_format.empty());
  std::string p = dir_ + "/nofmt.qcow2";
  std::ofstream(p, std::ios::binary) << nofmt;
  auto s = checkQcow2Overlay(p, base_, "raw");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), HasSubstr("backing format ''"));
}

TEST_F(Qcow2HeaderTest, EveryPrefixOfARealHeaderIsHandled) {
  std::string real = bytes(overlay("o.qcow2"));
  size_t accepted = 0;
  for (size_t n = 0; n <= 1024; ++n) accepted += parseQcow2Header(real.substr(0, n)).ok();
  // Once the backing name is whole, the rest reads as zeros (QEMU's view).
  EXPECT_GT(accepted, 0u);
  EXPECT_FALSE(parseQcow2Header(real.substr(0, 71)).ok());
}

TEST_F(Qcow2HeaderTest, OnlyARegularFileByItsOwnName) {
  std::string o = overlay("o.qcow2");
  fs::create_symlink(o, dir_ + "/link.qcow2");
  auto l = readQcow2Header(dir_ + "/link.qcow2");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().sysErrno(), ELOOP);
  auto d = readQcow2Header("/dev/null");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.error().message(), HasSubstr("not a regular file"));
  // A raw image is no qcow2.
  EXPECT_FALSE(checkQcow2Overlay(base_, "", "raw").ok());
}

}  // namespace
}  // namespace vessel::hypervisor::qemu
