#include "templates/manifest.h"

#include <gtest/gtest.h>

namespace vessel::templates {
namespace {

Manifest sample() {
  Manifest m;
  m.name = "minimal";
  m.version = "abc123";
  m.spec_hash = std::string(64, 'a');
  m.qemu_version = "QEMU 7.2";
  m.kernel_sha256 = std::string(64, 'b');
  m.cmdline = "init=/sbin/vessel-agent";
  m.vcpus = 2;
  m.memory_mib = 256;
  m.created_at = "2026-11-30T00:00:00Z";
  for (const char* f : {kRootfsFile, kMemoryFile, kStateFile}) m.files[f] = std::string(64, 'c');
  return m;
}

TEST(ManifestTest, RoundTrip) {
  auto m = parseManifest(toJson(sample()));
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->name, "minimal");
  EXPECT_EQ(m->vcpus, 2u);
  EXPECT_EQ(m->files.size(), 3u);
}

TEST(ManifestTest, RefusesBadInput) {
  EXPECT_FALSE(parseManifest("").ok());
  EXPECT_FALSE(parseManifest("[]").ok());
  Manifest m = sample();
  m.format = 2;
  EXPECT_EQ(parseManifest(toJson(m)).error().code(), Code::kFailedPrecondition);
  m = sample();
  m.files["../etc/passwd"] = std::string(64, 'd');
  EXPECT_FALSE(parseManifest(toJson(m)).ok());
  m = sample();
  m.files.erase(kMemoryFile);
  EXPECT_FALSE(parseManifest(toJson(m)).ok());
  m = sample();
  m.vcpus = 0;
  EXPECT_FALSE(parseManifest(toJson(m)).ok());
  m = sample();
  m.files[kStateFile] = "short";
  EXPECT_FALSE(parseManifest(toJson(m)).ok());
  for (std::vector<std::string> bad :
       {std::vector<std::string>{"NOEQUALS"}, std::vector<std::string>{"=x"},
        std::vector<std::string>{std::string("A=b\0c", 5)},
        std::vector<std::string>(kMaxManifestEnv + 1, "A=1"),
        std::vector<std::string>(9, "A=" + std::string(4096, 'x'))}) {
    m = sample();
    m.env = bad;
    EXPECT_FALSE(parseManifest(toJson(m)).ok()) << bad.size();
  }
}

// The template's default env (its build spec's and image's) is kept.
TEST(ManifestTest, EnvRoundTripsAndIsOptional) {
  Manifest m = sample();
  EXPECT_EQ(toJson(m).find("\"env\""), std::string::npos) << "absent when empty";
  m.env = {"PATH=/usr/bin", "A=b=c"};
  auto back = parseManifest(toJson(m));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->env, m.env);
}

// The start command's pid (vesseld follows its output): optional, a real
// pid or refused.
TEST(ManifestTest, StartPidRoundTripsIsOptionalAndRangeChecked) {
  Manifest m = sample();
  EXPECT_EQ(toJson(m).find("start_pid"), std::string::npos) << "absent when there is none";
  m.start_pid = 73;
  auto back = parseManifest(toJson(m));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->start_pid, 73u);
  for (const char* bad : {"0", "1", "4194305", "-5", "\"7\"", "1.5"}) {
    std::string text = toJson(sample());
    text.insert(1, std::string("\"start_pid\":") + bad + ",");
    EXPECT_FALSE(parseManifest(text).ok()) << bad;
  }
}

}  // namespace
}  // namespace vessel::templates
