// Many machines, end to end (issue 15): one real PostgreSQL, three
// `vesseld --role=node` processes each in its own network namespace (a
// "host" with a veth on a bridge this test makes), and two `--role=api`
// replicas. The nodes run the fake hypervisor (its "VMs" are the real
// agent on the host), so the test is about the cluster, not guest boots.
//
// Creates spread over the nodes and exec reaches each through its own data
// plane; one node is killed with SIGKILL and another's link is cut: creates
// keep succeeding on the third, nothing stays pending, and the sandboxes
// of the lost nodes are failed with the reason. When the nodes return,
// they reconcile and the store and the nodes agree. An API replica killed
// in the middle of operations: the other one ends every one of them.
// Needs root (namespaces, veth, bridge).
#include "cluster_e2e_fixture.h"

namespace vessel::cluster_e2e {
namespace {

TEST_F(ClusterTest, PlacesRoutesSurvivesNodeLossAndReplicaLoss) {
  // Creates through both replicas spread over the three nodes.
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    auto [id, op] = create(i % kApis);
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(waitUntil([&] { return finished(i % kApis, op); })) << logs();
    ASSERT_EQ(opState((i + 1) % kApis, op), "done") << logs();  // either replica answers
    ids.push_back(id);
  }
  std::map<std::string, std::vector<std::string>> on;
  for (const auto& id : ids) on[row(id)->node].push_back(id);
  ASSERT_EQ(on.size(), 3u) << logs();
  for (int i = 0; i < kNodes; ++i) {
    ASSERT_EQ(on[nodeName(i)].size(), 2u) << nodeName(i);
    const auto& id = on[nodeName(i)][0];
    EXPECT_EQ(echo(i % kApis, id, "hello-" + id), "hello-" + id + "\n") << logs();
  }

  // node0 dies; node1's link is cut.
  (void)nodes_[0].signal(SIGKILL);
  (void)nodes_[0].waitFor(10s);
  ASSERT_TRUE(sh("ip -n " + netns(1) + " link set eth0 down"));
  ASSERT_TRUE(waitUntil([&] {
    auto n = nodeRows();
    return n["node0"].lost && n["node1"].lost;
  })) << logs();
  for (int i : {0, 1})
    for (const auto& id : on[nodeName(i)]) {
      ASSERT_TRUE(waitUntil([&] { return row(id)->state == store::SandboxState::kFailed; }))
          << id << logs();
      EXPECT_EQ(row(id)->error, "node " + nodeName(i) + " lost");
    }
  // Creates keep succeeding, on the node that is left.
  for (int i = 0; i < 4; ++i) {
    auto [id, op] = create(i % kApis);
    ASSERT_TRUE(waitUntil([&] { return finished(0, op); })) << logs();
    EXPECT_EQ(opState(0, op), "done") << logs();
    EXPECT_EQ(row(id)->node, "node2");
    on["node2"].push_back(id);
  }
  EXPECT_EQ(echo(1, on["node2"].back(), "still"), "still\n");
  // Deleting a sandbox of a lost node ends (the node destroys it on return).
  {
    auto r = client(apiUrl(0), key_).del("/v1/sandboxes/" + on["node1"][1]);
    ASSERT_TRUE(r.ok()) << r.error().message();
    ASSERT_TRUE(waitUntil([&] { return finished(0, testing::str(r->at("operation"), "id")); }));
  }
  ASSERT_TRUE(waitUntil([&] {
    auto u = store_->listUnfinishedOperations();
    return u.ok() && u->empty();
  })) << "operations stayed pending\n"
      << logs();

  // Both come back: node0 restarts on its state dir, node1's link is up.
  ASSERT_TRUE(startNode(0)) << logs();
  ASSERT_TRUE(sh("ip -n " + netns(1) + " link set eth0 up"));
  // Consistent: each node runs exactly the sandboxes the store places on
  // it (node1 destroyed its fake VMs of failed sandboxes on reconciling).
  ASSERT_TRUE(waitUntil([&] {
    auto n = nodeRows();
    for (int i = 0; i < kNodes; ++i) {
      auto live = store_->listNodeSandboxes(nodeName(i));
      if (n[nodeName(i)].lost || !live.ok() ||
          n[nodeName(i)].sandboxes != static_cast<int64_t>(live->size()))
        return false;
    }
    return true;
  })) << logs();
  EXPECT_EQ(store_->listNodeSandboxes("node0")->size(), 0u);
  EXPECT_EQ(store_->listNodeSandboxes("node1")->size(), 0u);
  EXPECT_EQ(store_->listNodeSandboxes("node2")->size(), on["node2"].size());
  // New creates may land on the returned nodes again.
  std::string owner0;  // replica 0's id, as its operations record it
  {
    auto [id, op] = create(0);
    ASSERT_TRUE(waitUntil([&] { return finished(0, op); }));
    EXPECT_EQ(opState(0, op), "done") << logs();
    owner0 = (*store_->getOperation("dev", op))->owner;
    ASSERT_FALSE(owner0.empty());
  }

  // Replica 1 dies with operations in flight: the nodes are frozen for a
  // moment (SIGSTOP, shorter than --node-lost-after) so that none of its
  // calls can end before it is killed. Replica 0 takes every one over and
  // ends it from what the nodes then hold.
  for (auto& n : nodes_) ASSERT_TRUE(n.signal(SIGSTOP).ok());
  std::vector<std::pair<std::string, std::string>> mid;
  for (int i = 0; i < 3; ++i) mid.push_back(create(1));
  {
    auto r = client(apiUrl(1), key_).del("/v1/sandboxes/" + on["node2"][0]);
    ASSERT_TRUE(r.ok()) << r.error().message();
    mid.emplace_back(on["node2"][0], testing::str(r->at("operation"), "id"));
  }
  (void)apis_[1].signal(SIGKILL);
  (void)apis_[1].waitFor(10s);
  for (auto& n : nodes_) ASSERT_TRUE(n.signal(SIGCONT).ok());
  for (const auto& [id, op] : mid) {
    ASSERT_TRUE(waitUntil([&] { return finished(0, op); })) << op << logs();
    EXPECT_EQ((*store_->getOperation("dev", op))->owner, owner0) << "not taken over: " << op;
    auto sb = row(id);
    ASSERT_TRUE(sb.has_value());
    if (opState(0, op) == "done")
      EXPECT_TRUE(sb->state == store::SandboxState::kRunning ||
                  sb->state == store::SandboxState::kDeleted)
          << store::stateName(sb->state);
    else
      EXPECT_EQ(sb->state, store::SandboxState::kFailed) << op << logs();
  }
  auto u = store_->listUnfinishedOperations();
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->empty());
}

TEST_F(ClusterTest, TemplatesAreCopiedCheckedAndForkedThroughReplicas) {
  // "solo" on node0 only, so large (a number only, to the fake) that one
  // sandbox of it fills a node: the next create must go to another node.
  uint64_t big = 0;
  ASSERT_NO_FATAL_FAILURE(putSoloOnNode0(&big));
  const std::string cache0 = dir_->path() + "/node0-cache/templates";
  ASSERT_TRUE(waitUntil([&] {
    auto t = store_->getTemplate("solo", "");
    return t.ok() && t->has_value();
  })) << "node0 did not register solo\n"
      << logs();
  // Put on node0 by hand, not made through a replica: unsigned until the
  // operator signs it (catalogue_signature.h); the nodes copy only then.
  signAsReplicas("solo", "v1");
  // The replicas list it from the catalogue (they have no files).
  ASSERT_TRUE(waitUntil([&] {
    auto l = client(apiUrl(1), key_).get("/v1/templates");
    return l.ok() && json::serialize(*l).find("\"solo\"") != std::string::npos;
  })) << logs();

  auto [first, op1] = createOf(0, "solo");
  ASSERT_TRUE(waitUntil([&] { return finished(0, op1); })) << logs();
  ASSERT_EQ(opState(0, op1), "done") << opJson(0, op1) << logs();
  ASSERT_EQ(row(first)->node, "node0");
  ASSERT_TRUE(waitUntil([&] { return nodeRows()["node0"].memory_free_mib < big; })) << logs();

  // Copied to the node the next one is placed on, checked, and it runs.
  auto [second, op2] = createOf(1, "solo");
  ASSERT_TRUE(waitUntil([&] { return finished(1, op2); })) << logs();
  ASSERT_EQ(opState(1, op2), "done") << opJson(1, op2) << logs();
  const std::string copied = row(second)->node;
  ASSERT_NE(copied, "node0");
  EXPECT_EQ(echo(0, second, "copied"), "copied\n") << logs();
  const std::string cache1 = dir_->path() + "/" + copied + "-cache/templates";
  for (const char* f : {templates::kRootfsFile, templates::kMemoryFile, templates::kStateFile})
    EXPECT_EQ(sha256File(cache1 + "/solo/v1/" + f).value_or("a"),
              sha256File(cache0 + "/solo/v1/" + f).value_or("b"))
        << f;
  ASSERT_TRUE(waitUntil([&] { return nodeRows()[copied].memory_free_mib < big; })) << logs();

  // Both sources corrupted (one byte each): the third node refuses the copy.
  for (const auto& root : {cache0, cache1}) {
    std::string p = root + "/solo/v1/" + templates::kRootfsFile;
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << p;
    f.seekp(3);
    f.put('#');
  }
  auto [third, op3] = createOf(0, "solo");
  ASSERT_TRUE(waitUntil([&] { return finished(0, op3); })) << logs();
  std::string why = opJson(0, op3);
  EXPECT_EQ(opState(0, op3), "failed") << why;
  EXPECT_NE(why.find("the catalogue's manifest says"), std::string::npos) << why;
  EXPECT_NE(why.find("rootfs.ext4"), std::string::npos) << why;
  const std::string refused = row(third)->node;
  ASSERT_TRUE(refused != "node0" && refused != copied) << refused;
  const std::string cache2 = dir_->path() + "/" + refused + "-cache/templates";
  EXPECT_FALSE(std::filesystem::exists(cache2 + "/solo"));
  for (const auto& e : std::filesystem::directory_iterator(cache2))
    EXPECT_NE(e.path().filename().string().rfind(".staging-", 0), 0u) << e.path();

  // A fork into a template through a replica runs on the sandbox's node,
  // which registers it: the other replica creates from it at once.
  {
    auto [parent, pop] = create(0);
    ASSERT_TRUE(waitUntil([&] { return finished(0, pop); })) << logs();
    ASSERT_EQ(opState(0, pop), "done") << opJson(0, pop);
    auto f = client(apiUrl(1), key_)
                 .post("/v1/sandboxes/" + parent + ":fork", json::object{{"template", "forked"}});
    ASSERT_TRUE(f.ok()) << f.error().message();
    std::string fop = testing::str(f->at("operation"), "id");
    ASSERT_TRUE(waitUntil([&] { return finished(1, fop); })) << logs();
    ASSERT_EQ(opState(0, fop), "done") << opJson(0, fop) << logs();
    auto [fromFork, op5] = createOf(0, "forked");
    ASSERT_TRUE(waitUntil([&] { return finished(0, op5); })) << logs();
    EXPECT_EQ(opState(0, op5), "done") << opJson(0, op5) << logs();
    EXPECT_EQ(echo(1, fromFork, "forked"), "forked\n");
  }
}

}  // namespace
}  // namespace vessel::cluster_e2e
