// A Dockerfile's steps against the real agent run on the host (no VM): the
// guest paths live under a scratch directory, the accounts are the host's
// /etc/passwd and /etc/group as a guest's would be.
#include "node/build_steps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agentclient/testing/agent_harness.h"

namespace vessel::node {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using agentclient::testing::runFor;
using templates::BuildStep;
using ::testing::HasSubstr;

class BuildStepsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (owners)";
    char tmpl[] = "/tmp/vessel-steps-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto h = agentclient::testing::HostAgent::start(io_, VESSEL_AGENT_BINARY);
    ASSERT_TRUE(h.ok()) << h.error().message();
    agent_ = std::move(*h);
  }
  void TearDown() override {
    agent_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  Status run(const std::vector<BuildStep>& steps) {
    progress_.clear();
    log_.clear();
    return runFor(
        io_,
        runBuildSteps(
            *agent_->client(), steps, [this](const std::string& s, int) { progress_.push_back(s); },
            [this](const BuildLogEntry& e) { log_.push_back(e); }, Clock::now() + 30s),
        60s);
  }
  static BuildStep runStep(unsigned line, std::vector<std::string> argv) {
    BuildStep s;
    s.kind = BuildStep::Kind::kRun;
    s.line = line;
    s.text = "RUN ...";
    s.argv = std::move(argv);
    return s;
  }
  static std::string slurp(const std::string& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

  asio::io_context io_;
  std::unique_ptr<agentclient::testing::HostAgent> agent_;
  std::string dir_;
  std::vector<std::string> progress_;
  std::vector<BuildLogEntry> log_;
};

TEST_F(BuildStepsTest, RunsWritesAndMakesWithModesOwnersAndEnvironment) {
  BuildStep dir;
  dir.kind = BuildStep::Kind::kMkdir;
  dir.line = 2;
  dir.text = "COPY d /d";
  dir.path = dir_ + "/d";
  dir.mode = 0770;
  dir.owner = "daemon:daemon";
  BuildStep file;
  file.kind = BuildStep::Kind::kWrite;
  file.line = 2;
  file.text = dir.text;
  file.path = dir_ + "/d/sub/f.sh";
  file.content = "#!/bin/sh\necho hi\n";
  file.mode = 0750;
  file.owner = "1:0";
  BuildStep r = runStep(3, {"/bin/sh", "-c", "pwd > out; echo \"$A\" >> out; id -u >> out"});
  r.workdir = dir_ + "/work";
  r.env = {"A=from the step"};
  r.user = "1";  // by number: the host agent reads its own passwd file, not /etc/passwd
  // The scratch directory is root's 0700: daemon needs to get to its workdir.
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  ASSERT_TRUE(fs::create_directories(dir_ + "/work"));
  ASSERT_EQ(::chown((dir_ + "/work").c_str(), 1, 1), 0);
  Status st = run({dir, file, r});
  ASSERT_TRUE(st.ok()) << st.error().message();

  struct stat sd {
  }, sf{};
  ASSERT_EQ(::stat((dir_ + "/d").c_str(), &sd), 0);
  EXPECT_EQ(sd.st_mode & 07777, 0770u) << "PID 1's umask does not strip a COPY'd directory's mode";
  EXPECT_EQ(sd.st_uid, 1u);
  EXPECT_EQ(sd.st_gid, 1u);
  ASSERT_EQ(::stat(file.path.c_str(), &sf), 0);
  EXPECT_EQ(sf.st_mode & 07777, 0750u);
  EXPECT_EQ(sf.st_uid, 1u);
  EXPECT_EQ(sf.st_gid, 0u);
  EXPECT_EQ(slurp(file.path), file.content);
  EXPECT_EQ(slurp(dir_ + "/work/out"), dir_ + "/work\nfrom the step\n1\n");
  // One progress line per instruction, not per file.
  EXPECT_EQ(progress_.size(), 2u);
  EXPECT_THAT(progress_[0], HasSubstr("line 2 (COPY d /d)"));
}

TEST_F(BuildStepsTest, AFailingStepNamesItsLineExitAndLastOutput) {
  std::string script;
  for (int i = 1; i <= 30; ++i) script += "echo line" + std::to_string(i) + "; ";
  script += "echo oops >&2; exit 3";
  Status st = run({runStep(7, {"/bin/sh", "-c", "true"}), runStep(9, {"/bin/sh", "-c", script}),
                   runStep(10, {"/bin/sh", "-c", "touch " + dir_ + "/never"})});
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message(), HasSubstr("RUN at line 9 (RUN ...) failed (exit 3)"));
  EXPECT_THAT(st.error().message(), HasSubstr("line30"));
  EXPECT_THAT(st.error().message(), HasSubstr("oops"));
  EXPECT_THAT(st.error().message(), ::testing::Not(HasSubstr("line5\n"))) << "only the last lines";
  EXPECT_FALSE(fs::exists(dir_ + "/never")) << "the steps after a failure do not run";
  // The log: each instruction started and (the first) ended; every line of
  // the failing one's output in order, stdout and stderr apart.
  std::vector<std::string> out, err, kinds;
  for (const auto& e : log_) {
    if (e.kind == "stdout") out.insert(out.end(), e.lines.begin(), e.lines.end());
    if (e.kind == "stderr") err.insert(err.end(), e.lines.begin(), e.lines.end());
    if (e.kind == "step" || e.kind == "done") kinds.push_back(e.kind + std::to_string(e.line));
  }
  EXPECT_THAT(kinds, ::testing::ElementsAre("step7", "done7", "step9"));
  ASSERT_EQ(out.size(), 30u);
  EXPECT_EQ(out.front(), "line1");
  EXPECT_EQ(out.back(), "line30");
  EXPECT_THAT(err, ::testing::ElementsAre("oops"));
  EXPECT_EQ(log_.back().step, 2u) << "steps are numbered by instruction";

  BuildStep owned;
  owned.kind = BuildStep::Kind::kWrite;
  owned.line = 4;
  owned.path = dir_ + "/x";
  owned.owner = "no-such-user-here";
  Status o = run({owned});
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.error().message(), HasSubstr("no user 'no-such-user-here'"));
  EXPECT_THAT(o.error().message(), HasSubstr("line 4"));
}

TEST_F(BuildStepsTest, UnpacksAnArchiveWithTheGuestsTar) {
  std::string src = dir_ + "/src";
  fs::create_directories(src + "/inner");
  std::ofstream(src + "/inner/a.txt") << "from the archive";
  std::string tgz = dir_ + "/a.tgz";
  ASSERT_EQ(std::system(("tar -czf " + tgz + " -C " + src + " inner").c_str()), 0);
  BuildStep u;
  u.kind = BuildStep::Kind::kUnpack;
  u.line = 5;
  u.path = dir_ + "/opt";
  u.content = slurp(tgz);
  Status st = run({u});
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(slurp(dir_ + "/opt/inner/a.txt"), "from the archive");
}

TEST(TailLinesTest, KeepsTheLastLines) {
  EXPECT_EQ(tailLines("a\nb\nc\n", 2), "b\nc");
  EXPECT_EQ(tailLines("a\nb\nc", 5), "a\nb\nc");
  EXPECT_EQ(tailLines("", 3), "");
  EXPECT_EQ(tailLines("one", 1), "one");
}

}  // namespace
}  // namespace vessel::node
