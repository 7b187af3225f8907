// AgentClient file calls against the host-run agent: streamed atomic upload
// and download, metadata calls, typed errors and inotify watches.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "agentclient/agent_client.h"
#include "agentclient/testing/agent_harness.h"

namespace vessel::agentclient {
namespace {

using testing::runFor;
using namespace std::chrono_literals;

class AgentFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto h = testing::HostAgent::start(io_, VESSEL_AGENT_BINARY);
    ASSERT_TRUE(h.ok()) << h.error().message();
    agent_ = std::move(*h);
    c_ = agent_->client();
    char tmpl[] = "/tmp/vessel-agent-files-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) EXPECT_TRUE(runFor(io_, c_->remove(dir_, true), 10s).ok());
    if (c_) EXPECT_FALSE(c_->failure());
  }

  // Uploads `size` pattern bytes; returns their SHA-256.
  Result<std::string> upload(const std::string& path, size_t size, WriteFileOptions o = {}) {
    o.path = path;
    auto w = runFor(io_, c_->writeFile(o));
    if (!w.ok()) return std::move(w).error();
    testing::PatternSource src(42);
    testing::Sha256 sha;
    for (size_t done = 0; done < size;) {
      std::string chunk = src.next(std::min<size_t>(1 << 20, size - done));
      sha.update(chunk);
      done += chunk.size();
      VESSEL_TRY(runFor(io_, (*w)->write(chunk)));
    }
    VESSEL_TRY(runFor(io_, (*w)->finish()));
    return sha.hex();
  }
  Result<std::string> download(const std::string& path) {
    auto r = runFor(io_, c_->readFile(path));
    if (!r.ok()) return std::move(r).error();
    testing::Sha256 sha;
    for (;;) {
      auto chunk = runFor(io_, (*r)->read());
      if (!chunk.ok()) return std::move(chunk).error();
      if (!chunk->has_value()) break;
      sha.update(**chunk);
    }
    return sha.hex();
  }

  asio::io_context io_;
  std::unique_ptr<testing::HostAgent> agent_;
  std::shared_ptr<AgentClient> c_;
  std::string dir_;
};

TEST_F(AgentFilesTest, UploadDownloadWithModeAndOwner) {
  std::string path = dir_ + "/blob";
  WriteFileOptions o;
  o.mode = 0640;
  o.uid = 1000;
  o.gid = 1000;
  auto up = upload(path, 24 << 20, o);
  ASSERT_TRUE(up.ok()) << up.error().message();
  auto st = runFor(io_, c_->stat(path));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->size, 24u << 20);
  EXPECT_EQ(st->mode, 0640u);
  EXPECT_EQ(st->uid, 1000u);
  EXPECT_EQ(st->type, static_cast<uint8_t>(agentproto::FileType::kFile));
  auto down = download(path);
  ASSERT_TRUE(down.ok()) << down.error().message();
  EXPECT_EQ(*down, *up);
}

TEST_F(AgentFilesTest, WriteIsAtomicAndCancelLeavesNothing) {
  std::string path = dir_ + "/atomic";
  {
    WriteFileOptions o;
    o.path = path;
    auto w = runFor(io_, c_->writeFile(o));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(runFor(io_, (*w)->write("partial")).ok());
    ASSERT_TRUE(runFor(io_, c_->ping()).ok());  // the agent has seen the data
    auto st = runFor(io_, c_->stat(path));
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code(), Code::kNotFound);
  }                                           // dropped unfinished: cancelled
  ASSERT_TRUE(runFor(io_, c_->ping()).ok());  // frames are handled in order
  auto entries = runFor(io_, c_->list(dir_));
  ASSERT_TRUE(entries.ok());
  EXPECT_TRUE(entries->empty()) << (*entries)[0].path;
}

TEST_F(AgentFilesTest, MkdirListRenameRemove) {
  ASSERT_TRUE(runFor(io_, c_->mkdir(dir_ + "/a/b/c")).ok());
  ASSERT_TRUE(upload(dir_ + "/a/b/f", 10).ok());
  auto l1 = runFor(io_, c_->list(dir_, 1));
  ASSERT_TRUE(l1.ok());
  ASSERT_EQ(l1->size(), 1u);
  EXPECT_EQ((*l1)[0].path, "a");
  auto l3 = runFor(io_, c_->list(dir_, 3));
  ASSERT_TRUE(l3.ok());
  std::vector<std::string> names;
  for (const auto& e : *l3) names.push_back(e.path);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "a/b", "a/b/c", "a/b/f"}));
  ASSERT_TRUE(runFor(io_, c_->rename(dir_ + "/a/b/f", dir_ + "/g")).ok());
  EXPECT_TRUE(runFor(io_, c_->stat(dir_ + "/g")).ok());
  auto rm = runFor(io_, c_->remove(dir_ + "/a"));
  EXPECT_FALSE(rm.ok());  // not empty, not recursive
  EXPECT_TRUE(runFor(io_, c_->remove(dir_ + "/a", true)).ok());
  EXPECT_EQ(runFor(io_, c_->stat(dir_ + "/a")).error().code(), Code::kNotFound);
}

TEST_F(AgentFilesTest, TypedErrors) {
  auto r = runFor(io_, c_->readFile(dir_ + "/missing"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kNotFound);
  auto d = runFor(io_, c_->readFile(dir_));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), Code::kInvalidArgument);
  auto rel = runFor(io_, c_->stat("relative/path"));
  ASSERT_FALSE(rel.ok());
  EXPECT_EQ(rel.error().code(), Code::kInvalidArgument);
  auto up = upload(dir_ + "/no/such/dir/file", 100);
  ASSERT_FALSE(up.ok());
  EXPECT_EQ(up.error().code(), Code::kNotFound);
  auto mk = runFor(io_, c_->mkdir(dir_ + "/x/y", 0755, false));
  ASSERT_FALSE(mk.ok());
  EXPECT_EQ(mk.error().code(), Code::kNotFound);
  // The channel survives every one of these.
  EXPECT_TRUE(runFor(io_, c_->ping()).ok());
}

TEST_F(AgentFilesTest, WatchSeesChanges) {
  auto w = runFor(io_, c_->watch(dir_));
  ASSERT_TRUE(w.ok()) << w.error().message();
  ASSERT_TRUE(upload(dir_ + "/watched", 5).ok());
  auto seen = [&]() -> asio::awaitable<Result<bool>> {
    for (;;) {
      VESSEL_CO_ASSIGN_OR_RETURN(WatchEvent ev, co_await (*w)->next());
      if (ev.name == "watched" && (ev.kind & agentproto::WatchEventMsg::kMovedTo)) co_return true;
    }
  };
  auto r = runFor(io_, seen(), 10s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  w->reset();
  EXPECT_TRUE(runFor(io_, c_->ping()).ok());
}

}  // namespace
}  // namespace vessel::agentclient
