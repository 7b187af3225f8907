// An API replica's volumes (cluster_volumes.h) over real node API servers
// on real HTTP listeners, each node's keeper an in-memory fake: a new
// volume goes to the node with the most space for it, each call on a
// volume goes to its node, files stream both ways in pieces (a refusal
// before any of an upload is sent), errors come back with their codes, a
// node that is down fails its volumes' calls with 503 naming it, and a
// sandbox mounting volumes is placed on their node and mounted there.
#include "cluster/cluster_volumes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "base/run_blocking.h"
#include "cluster/node_server.h"
#include "http/server.h"
#include "ops/testing/fake_node.h"

namespace vessel::cluster {
namespace {

using namespace std::chrono_literals;

// A keeper whose volumes are maps of path -> contents.
class MemoryKeeper final : public ops::VolumeKeeper {
 public:
  std::map<std::string, std::map<std::string, std::string>> volumes;  // id -> path -> data
  std::vector<std::string> calls;

  Result<std::string> place(uint64_t) override { return std::string(); }
  asio::awaitable<Status> create(store::VolumeRecord v) override {
    calls.push_back("create " + v.id + " " + std::to_string(v.size_mib));
    volumes[v.id];
    co_return okStatus();
  }
  asio::awaitable<Status> copy(store::VolumeRecord from, store::VolumeRecord to) override {
    calls.push_back("copy " + from.id + " " + to.id + (to.read_only ? " ro" : ""));
    volumes[to.id] = volumes[from.id];
    co_return okStatus();
  }
  asio::awaitable<Status> remove(store::VolumeRecord v) override {
    calls.push_back("remove " + v.id);
    volumes.erase(v.id);
    co_return okStatus();
  }
  asio::awaitable<Result<ops::VolumeUsage>> usage(store::VolumeRecord v) override {
    uint64_t used = 0;
    for (const auto& [p, d] : volumes[v.id]) used += d.size();
    co_return ops::VolumeUsage{used, 1000};
  }
  asio::awaitable<Result<std::vector<ops::VolumeFileInfo>>> list(store::VolumeRecord v,
                                                                 std::string) override {
    std::vector<ops::VolumeFileInfo> out;
    for (const auto& [p, d] : volumes[v.id])
      out.push_back({p.substr(1), p, "file", d.size(), 0644, 0, 0, 1000, ""});
    co_return out;
  }
  asio::awaitable<Status> mkdir(store::VolumeRecord v, std::string path, uint32_t mode,
                                bool parents) override {
    calls.push_back("mkdir " + v.id + " " + path + " " + std::to_string(mode) +
                    (parents ? " -p" : ""));
    co_return okStatus();
  }
  asio::awaitable<Status> removePath(store::VolumeRecord v, std::string path, bool) override {
    if (!volumes[v.id].erase(path)) co_return Error(Code::kNotFound, path + ": no such file");
    co_return okStatus();
  }
  asio::awaitable<Result<std::unique_ptr<ops::VolumeReader>>> read(store::VolumeRecord v,
                                                                   std::string path) override {
    auto it = volumes[v.id].find(path);
    if (it == volumes[v.id].end()) co_return Error(Code::kNotFound, path + ": no such file");
    std::unique_ptr<ops::VolumeReader> r = std::make_unique<Reader>(it->second);
    co_return r;
  }
  asio::awaitable<Result<std::unique_ptr<ops::VolumeWriter>>> write(store::VolumeRecord v,
                                                                    std::string path,
                                                                    uint32_t mode) override {
    if (v.read_only) co_return Error(Code::kFailedPrecondition, "the volume is read-only");
    std::unique_ptr<ops::VolumeWriter> w =
        std::make_unique<Writer>(volumes[v.id], std::move(path), mode);
    co_return w;
  }

 private:
  // 100 KiB at a time, as a disk would hand them out.
  struct Reader final : ops::VolumeReader {
    explicit Reader(std::string d) : data(std::move(d)) {}
    asio::awaitable<Result<std::optional<std::string>>> next() override {
      if (at >= data.size()) co_return std::optional<std::string>();
      std::string piece = data.substr(at, 100 * 1024);
      at += piece.size();
      co_return std::optional<std::string>(std::move(piece));
    }
    std::string data;
    size_t at = 0;
  };
  // Whole only at commit; "full" past 1 MiB.
  struct Writer final : ops::VolumeWriter {
    Writer(std::map<std::string, std::string>& v, std::string p, uint32_t m)
        : vol(v), path(std::move(p)), mode(m) {}
    asio::awaitable<Status> append(std::string d) override {
      data += d;
      if (data.size() > (1u << 20)) co_return Error(Code::kResourceExhausted, "the volume is full");
      co_return okStatus();
    }
    asio::awaitable<Result<ops::VolumeFileInfo>> commit() override {
      vol[path] = data;
      co_return ops::VolumeFileInfo{path.substr(1), path, "file", data.size(), mode, 0, 0, 1, ""};
    }
    std::map<std::string, std::string>& vol;
    std::string path, data;
    uint32_t mode;
  };
};

class MemoryMounter final : public ops::VolumeMounter {
 public:
  std::vector<std::string> calls;
  asio::awaitable<Status> mount(std::string id, std::shared_ptr<agentclient::AgentClient>,
                                std::vector<ops::VolumeAttachment> v) override {
    for (const auto& a : v)
      calls.push_back("mount " + id + " " + a.volume_id + " " + a.path +
                      (a.read_only ? " ro" : ""));
    co_return okStatus();
  }
  asio::awaitable<void> quiesce(std::string id, std::shared_ptr<agentclient::AgentClient>,
                                bool hold) override {
    calls.push_back("quiesce " + id + (hold ? " hold" : ""));
    co_return;
  }
  asio::awaitable<void> unquiesce(std::string id,
                                  std::shared_ptr<agentclient::AgentClient>) override {
    calls.push_back("unquiesce " + id);
    co_return;
  }
  void release(const std::string& id) override { calls.push_back("release " + id); }
};

class ClusterVolumesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/cluster_volumes_test_" + std::to_string(::getpid()) + ".db";
    auto s = store::openSqlite(path_, &clock_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    ASSERT_TRUE(store_->createTenant("t1", "one").ok());
    for (int i = 0; i < 2; ++i) {
      fakes_.push_back(std::make_unique<ops::testing::FakeNode>(io_));
      keepers_.push_back(std::make_unique<MemoryKeeper>());
      mounters_.push_back(std::make_unique<MemoryMounter>());
      servers_.push_back(std::make_unique<NodeServer>(*fakes_.back(), token(i)));
      servers_.back()->setVolumes(keepers_.back().get(), mounters_.back().get());
      http_.push_back(std::make_unique<http::HttpServer>(io_, nodeServerLimits()));
      servers_.back()->install(*http_.back());
      ASSERT_TRUE(http_.back()->listen({"127.0.0.1", 0}).ok());
    }
    heartbeat(0, 5000);
    heartbeat(1, 9000);  // the most room: new volumes go here
    ClusterOptions o;
    auto tokens = NodeTokens::parse("n0 " + token(0) + "\nn1 " + token(1) + "\n");
    ASSERT_TRUE(tokens.ok()) << tokens.error().message();
    o.tokens = *tokens;
    o.lost_after = 10s;
    cluster_ = std::make_unique<ClusterNode>(io_, *store_, o);
    volumes_ = std::make_unique<ClusterVolumes>(*cluster_);
    mounts_ = std::make_unique<ClusterVolumeMounter>(*cluster_);
  }
  void TearDown() override {
    mounts_.reset();
    volumes_.reset();
    cluster_.reset();
    for (auto& h : http_) h->close();
    store_.reset();
    for (const char* sfx : {"", "-wal", "-shm"}) ::unlink((path_ + sfx).c_str());
  }
  void heartbeat(int i, uint64_t volume_free_mib, int64_t at_ms = 0) {
    clock_.set(at_ms ? at_ms : store::nowMs());
    store::NodeRecord n;
    n.name = name(i);
    n.memory_mib = n.memory_free_mib = 4096;
    n.templates = {"minimal"};
    n.volume_free_mib = volume_free_mib;
    n.advertise_url = "http://127.0.0.1:" + std::to_string(http_[i]->port());
    ASSERT_TRUE(store_->heartbeatNode(n).ok());
  }
  static std::string name(int i) { return "n" + std::to_string(i); }
  static std::string token(int i) { return "token-of-node-" + std::to_string(i) + "-0123456789"; }
  // The record as the volumes API would store it, placed by the replica.
  store::VolumeRecord made(const std::string& id, uint64_t mib) {
    store::VolumeRecord v;
    v.id = id;
    v.tenant_id = "t1";
    v.name = "name-of-" + id;
    v.size_mib = mib;
    auto node = volumes_->place(mib);
    EXPECT_TRUE(node.ok()) << node.error().message();
    v.node = node.value_or("");
    EXPECT_TRUE(store_->insertVolume(v, -1).ok());
    auto s = runBlocking(io_, volumes_->create(v));
    EXPECT_TRUE(s.ok()) << s.error().message();
    return v;
  }
  std::string readAll(const store::VolumeRecord& v, const std::string& path, int* pieces) {
    auto r = runBlocking(io_, volumes_->read(v, path));
    if (!r.ok()) return "error: " + r.error().message();
    std::string all;
    for (;;) {
      auto p = runBlocking(io_, (*r)->next());
      if (!p.ok()) return "error: " + p.error().message();
      if (!*p) return all;
      all += **p;
      ++*pieces;
    }
  }

  asio::io_context io_;
  FakeWallClock clock_;
  std::string path_;
  std::unique_ptr<store::Store> store_;
  std::vector<std::unique_ptr<ops::testing::FakeNode>> fakes_;
  std::vector<std::unique_ptr<MemoryKeeper>> keepers_;
  std::vector<std::unique_ptr<MemoryMounter>> mounters_;
  std::vector<std::unique_ptr<NodeServer>> servers_;
  std::vector<std::unique_ptr<http::HttpServer>> http_;
  std::unique_ptr<ClusterNode> cluster_;
  std::unique_ptr<ClusterVolumes> volumes_;
  std::unique_ptr<ClusterVolumeMounter> mounts_;
};

TEST(RankVolumeNodesTest, RoomThenFreeSpaceAndOnlyLiveNodesThatKeepVolumes) {
  const int64_t now = 1'000'000;
  auto node = [&](const std::string& name, uint64_t free, int64_t hb, bool lost = false) {
    store::NodeRecord n;
    n.name = name;
    n.volume_free_mib = free;
    n.heartbeat_ms = hb;
    n.lost = lost;
    return n;
  };
  std::vector<store::NodeRecord> nodes = {
      node("a", 4000, now - 1000),       node("b", 6000, now - 1000),
      node("c", 0, now - 1000),           // keeps no volumes
      node("d", 9000, now - 60'000),      // silent too long
      node("e", 9000, now - 1000, true),  // marked lost
      node("f", 100, now - 1000),         // no room for 1 GiB
  };
  EXPECT_EQ(rankVolumeNodes(nodes, 1024, now, 15s), (std::vector<std::string>{"b", "a", "f"}));
  EXPECT_EQ(rankVolumeNodes(nodes, 5000, now, 15s), (std::vector<std::string>{"b", "a", "f"}));
  EXPECT_EQ(rankVolumeNodes(nodes, 7000, now, 15s), (std::vector<std::string>{"b", "a", "f"}));
  EXPECT_TRUE(rankVolumeNodes({}, 16, now, 15s).empty());
}

TEST_F(ClusterVolumesTest, EachVolumeLivesOnOneNodeAndItsFilesStreamThere) {
  auto v = made("vol-1", 64);
  EXPECT_EQ(v.node, "n1");
  EXPECT_EQ(keepers_[1]->calls, (std::vector<std::string>{"create vol-1 64"}));
  EXPECT_TRUE(keepers_[0]->calls.empty());

  // An upload of 700 KiB in pieces, read back in pieces of the node's.
  std::string data;
  for (int i = 0; data.size() < 700 * 1024; ++i) data += "line " + std::to_string(i) + "\n";
  auto w = runBlocking(io_, volumes_->write(v, "/big.txt", 0600));
  ASSERT_TRUE(w.ok()) << w.error().message();
  for (size_t at = 0; at < data.size(); at += 64 * 1024) {
    auto s = runBlocking(io_, (*w)->append(data.substr(at, 64 * 1024)));
    ASSERT_TRUE(s.ok()) << s.error().message();
  }
  EXPECT_EQ(keepers_[1]->volumes["vol-1"].count("/big.txt"), 0u) << "whole only at commit";
  auto info = runBlocking(io_, (*w)->commit());
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_EQ(info->size, data.size());
  EXPECT_EQ(info->mode, 0600u);
  EXPECT_EQ(keepers_[1]->volumes["vol-1"]["/big.txt"], data);
  int pieces = 0;
  EXPECT_EQ(readAll(v, "/big.txt", &pieces), data);
  EXPECT_GE(pieces, 3);

  auto l = runBlocking(io_, volumes_->list(v, "/"));
  ASSERT_TRUE(l.ok()) << l.error().message();
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].path, "/big.txt");
  EXPECT_EQ((*l)[0].size, data.size());
  auto u = runBlocking(io_, volumes_->usage(v));
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_EQ(u->used_bytes, data.size());
  ASSERT_TRUE(runBlocking(io_, volumes_->mkdir(v, "/a/b", 0750, true)).ok());
  EXPECT_EQ(keepers_[1]->calls.back(), "mkdir vol-1 /a/b 488 -p");

  // The node's refusals with their codes: a missing file, a full volume
  // (mid-upload), a snapshot refusing a write before any of it is sent.
  pieces = 0;
  EXPECT_NE(readAll(v, "/nope", &pieces).find("no such file"), std::string::npos);
  auto gone = runBlocking(io_, volumes_->removePath(v, "/nope", false));
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), Code::kNotFound);
  auto full = runBlocking(io_, volumes_->write(v, "/full", 0644));
  ASSERT_TRUE(full.ok()) << full.error().message();
  Status last = okStatus();
  const std::string mib(256 * 1024, 'x');
  for (int i = 0; i < 8 && last.ok(); ++i) last = runBlocking(io_, (*full)->append(mib));
  if (last.ok()) {
    auto done = runBlocking(io_, (*full)->commit());
    last = done.ok() ? okStatus() : Status(std::move(done).error());
  }
  ASSERT_FALSE(last.ok());
  EXPECT_EQ(last.error().code(), Code::kResourceExhausted) << last.error().message();
  EXPECT_EQ(keepers_[1]->volumes["vol-1"].count("/full"), 0u);

  store::VolumeRecord snap = v;
  snap.id = "vol-2";
  snap.name = "snap";
  snap.read_only = true;
  ASSERT_TRUE(runBlocking(io_, volumes_->copy(v, snap)).ok());
  EXPECT_EQ(keepers_[1]->calls.back(), "copy vol-1 vol-2 ro");
  auto refused = runBlocking(io_, volumes_->write(snap, "/x", 0644));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kFailedPrecondition) << refused.error().message();

  ASSERT_TRUE(runBlocking(io_, volumes_->removePath(v, "/big.txt", false)).ok());
  ASSERT_TRUE(runBlocking(io_, volumes_->remove(v)).ok());
  EXPECT_EQ(keepers_[1]->volumes.count("vol-1"), 0u);
  EXPECT_TRUE(keepers_[0]->calls.empty()) << "nothing reached the other node";
}

TEST_F(ClusterVolumesTest, ANodeThatIsDownTakesItsVolumesWithIt) {
  auto v = made("vol-1", 64);
  ASSERT_EQ(v.node, "n1");
  // n1's last heartbeat is older than the bound; n0's is fresh.
  heartbeat(1, 9000, store::nowMs() - 20'000);
  cluster_->sweepOnce();  // as the replica's sweeper does every second
  auto l = runBlocking(io_, volumes_->list(v, "/"));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code(), Code::kUnavailable);
  EXPECT_NE(l.error().message().find("node n1, which is down"), std::string::npos)
      << l.error().message();
  Status reach = volumes_->reachable(v);
  ASSERT_FALSE(reach.ok());
  EXPECT_EQ(reach.error().code(), Code::kUnavailable);
  auto rd = runBlocking(io_, volumes_->read(v, "/x"));
  ASSERT_FALSE(rd.ok());
  EXPECT_EQ(rd.error().code(), Code::kUnavailable);
  // New volumes go to the live node; no node keeping volumes: 503.
  auto next = volumes_->place(16);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, "n0");
  heartbeat(0, 0);
  auto none = volumes_->place(16);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), Code::kUnavailable);
}

TEST_F(ClusterVolumesTest, ASandboxMountingVolumesRunsAndMountsOnTheirNode) {
  heartbeat(0, 9999);  // n0 now has more room and more memory is equal: ranked first
  auto v = made("vol-1", 64);
  ASSERT_EQ(v.node, "n0");
  heartbeat(1, 9000);
  for (const char* id : {"sb-a", "sb-b"}) {
    ASSERT_TRUE(store_->insertSandbox({id, "t1", "minimal", store::SandboxState::kCreating}).ok());
    ops::NodeCreate c{id, "t1", "minimal"};
    c.memory_mib = 256;
    c.node = "n1";  // the other node: placed there whatever the ranking says
    ASSERT_TRUE(runBlocking(io_, cluster_->create(c)).ok());
    EXPECT_EQ(*store_->sandboxNode(id), "n1");
  }
  ASSERT_TRUE(
      store_->insertSandbox({"sb-v", "t1", "minimal", store::SandboxState::kCreating}).ok());
  ops::NodeCreate c{"sb-v", "t1", "minimal"};
  c.memory_mib = 256;
  c.node = v.node;
  ASSERT_TRUE(runBlocking(io_, cluster_->create(c)).ok());
  EXPECT_EQ(*store_->sandboxNode("sb-v"), "n0");
  std::vector<ops::VolumeAttachment> at = {{v.id, v.name, "/data", true, v.node}};
  ASSERT_TRUE(runBlocking(io_, mounts_->mount("sb-v", nullptr, at)).ok());
  auto quiet = [this]() -> asio::awaitable<bool> {
    co_await mounts_->quiesce("sb-v", nullptr, true);
    co_await mounts_->unquiesce("sb-v", nullptr);
    co_return true;
  };
  ASSERT_TRUE(runBlocking(io_, quiet()));
  EXPECT_EQ(mounters_[0]->calls, (std::vector<std::string>{"mount sb-v vol-1 /data ro",
                                                           "quiesce sb-v hold", "unquiesce sb-v"}));
  EXPECT_TRUE(mounters_[1]->calls.empty());
  // Its node down: a create that must run there fails at once, saying why.
  heartbeat(0, 9999, store::nowMs() - 20'000);
  ASSERT_TRUE(
      store_->insertSandbox({"sb-w", "t1", "minimal", store::SandboxState::kCreating}).ok());
  ops::NodeCreate w{"sb-w", "t1", "minimal"};
  w.node = "n0";
  auto s = runBlocking(io_, cluster_->create(w));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kUnavailable);
  EXPECT_NE(s.error().message().find("node n0, which keeps the volumes"), std::string::npos)
      << s.error().message();
  EXPECT_EQ(fakes_[0]->count("create sb-w"), 0);
}

}  // namespace
}  // namespace vessel::cluster
