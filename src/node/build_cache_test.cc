#include "node/build_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "base/fd.h"

namespace vessel::node {
namespace {

namespace fs = std::filesystem;
using templates::BuildStep;

BuildStep run(unsigned line, std::string cmd) {
  BuildStep s;
  s.line = line;
  s.text = "RUN " + cmd;
  s.argv = {"/bin/sh", "-c", std::move(cmd)};
  return s;
}

BuildStep write(unsigned line, std::string path, std::string content) {
  BuildStep s;
  s.kind = BuildStep::Kind::kWrite;
  s.line = line;
  s.text = "COPY . /app";
  s.path = std::move(path);
  s.content = std::move(content);
  return s;
}

std::vector<std::string> keysOf(const std::vector<CachedInstruction>& v) {
  std::vector<std::string> out;
  for (const auto& c : v) out.push_back(c.key);
  return out;
}

TEST(InstructionKeysTest, AChangeRekeysItsInstructionAndEveryOneAfterNoneBefore) {
  std::vector<BuildStep> steps = {run(2, "apt-get update"), write(3, "/app/a", "1"),
                                  write(3, "/app/b", "2"), run(4, "make"), run(5, "make test")};
  auto base = instructionKeys("root", steps);
  ASSERT_EQ(base.size(), 4u) << "the COPY's two files are one instruction";
  EXPECT_EQ(base[1].steps.begin, 1u);
  EXPECT_EQ(base[1].steps.end, 3u);

  auto last = steps;
  last[4].argv[2] = "make check";
  auto k = keysOf(instructionKeys("root", last));
  EXPECT_EQ(k[0], base[0].key);
  EXPECT_EQ(k[2], base[2].key);
  EXPECT_NE(k[3], base[3].key);

  auto copied = steps;
  copied[2].content = "changed";  // one file's bytes, nothing else
  k = keysOf(instructionKeys("root", copied));
  EXPECT_EQ(k[0], base[0].key);
  EXPECT_NE(k[1], base[1].key);
  EXPECT_NE(k[2], base[2].key) << "a step's key chains from its parent's";
  EXPECT_NE(k[3], base[3].key);

  auto user = steps;
  user[3].user = "app";
  EXPECT_NE(keysOf(instructionKeys("root", user))[2], base[2].key);

  // Lines moved by a comment above keep the cache; another root keeps none of it.
  auto moved = steps;
  for (auto& s : moved) s.line += 10;
  EXPECT_EQ(keysOf(instructionKeys("root", moved)), keysOf(base));
  auto other = keysOf(instructionKeys("other-root", steps));
  for (size_t i = 0; i < other.size(); ++i) EXPECT_NE(other[i], base[i].key);
}

TEST(InstructionKeysTest, TheRootNamesTheOwnerAndWhatRanBeforeTheSteps) {
  templates::BuildSpec spec;
  spec.commands = {"true"};
  StepsRoot r{"t-aaaa-", "base", "kernel", "qemu 7.2", false, {}, &spec};
  std::string key = stepsRootKey(r);
  EXPECT_EQ(stepsRootKey(r), key);
  StepsRoot other_tenant = r;
  other_tenant.owner = "t-bbbb-";
  EXPECT_NE(stepsRootKey(other_tenant), key) << "a tenant's cache serves only that tenant";
  StepsRoot other_base = r;
  other_base.base_sha256 = "base2";
  EXPECT_NE(stepsRootKey(other_base), key);
  templates::BuildSpec spec2 = spec;
  spec2.files["/etc/x"] = "y";
  StepsRoot with_file = r;
  with_file.spec = &spec2;
  EXPECT_NE(stepsRootKey(with_file), key);
  StepsRoot env = r;
  env.image_env = {"A=1"};
  EXPECT_NE(stepsRootKey(env), key);
}

class BuildCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("build-cache-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "src");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A disk of `mib` MiB of data (allocated, not a hole).
  std::string disk(const std::string& name, size_t mib, char fill) {
    std::string path = (dir_ / "src" / name).string();
    std::ofstream(path, std::ios::binary) << std::string(mib << 20, fill);
    return path;
  }
  static std::string key(char c) { return std::string(64, c); }

  fs::path dir_;
};

TEST_F(BuildCacheTest, KeepsAndFindsADiskAsItWas) {
  BuildCache c((dir_ / "cache").string(), 64);
  EXPECT_FALSE(c.find(key('a')));
  ASSERT_TRUE(c.put(key('a'), disk("d", 1, 'x')).ok());
  auto found = c.find(key('a'));
  ASSERT_TRUE(found);
  std::ifstream f(*found, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, std::string(1 << 20, 'x'));
  EXPECT_FALSE(c.find("../src/d")) << "a key is a hash, never a path";
  EXPECT_FALSE(c.put("../x", disk("e", 1, 'y')).ok());
}

TEST_F(BuildCacheTest, EvictsTheLeastRecentlyUsedBeyondItsBound) {
  BuildCache c((dir_ / "cache").string(), 3);
  ASSERT_TRUE(c.put(key('a'), disk("a", 1, 'a')).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(c.put(key('b'), disk("b", 1, 'b')).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(c.find(key('a')));  // a used again: b is now the oldest
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(c.put(key('c'), disk("c", 1, 'c')).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(c.put(key('d'), disk("d", 1, 'd')).ok());
  EXPECT_TRUE(c.find(key('a')));
  EXPECT_FALSE(c.find(key('b')));
  EXPECT_TRUE(c.find(key('d')));
  EXPECT_LE(c.allocatedBytes(), uint64_t{3} << 20);
  // A disk larger than the whole bound is not kept (and evicts nothing).
  ASSERT_TRUE(c.put(key('e'), disk("e", 4, 'e')).ok());
  EXPECT_FALSE(c.find(key('e')));
  EXPECT_TRUE(c.find(key('d')));
}

}  // namespace
}  // namespace vessel::node
