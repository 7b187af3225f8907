// Volumes on many machines (issue 27, item 6; docs/design.md "Volumes"):
// the cluster fixture's real PostgreSQL, three nodes and two API replicas.
// A volume made through one replica lives on one node; its files, written
// and read through either replica, are that node's; a sandbox mounting it
// is placed on that node and reads (and writes) the files through a real
// mount (the fake hypervisor's "VM" is the real agent on the host, its
// FUSE session relayed to a confined vessel-volume-server on the node);
// deleting the volume removes its image there. A node that is down takes
// its volumes with it (503 naming it) until it is back.
#include "cluster_e2e_fixture.h"

namespace vessel::cluster_e2e {
namespace {

// The node holding volume `name` of the dev tenant, from the store.
std::string volumeNode(store::Store& s, const std::string& name) {
  auto v = s.getVolume("dev", name);
  return v.ok() && *v ? (*v)->node : "";
}

class ClusterVolumesTest : public ClusterTest {
 protected:
  testing::Reply call(int api, const std::string& method, const std::string& target,
                      const std::string& body = "") {
    testing::Request r;
    r.method = method;
    r.target = target;
    r.body = body;
    r.bearer = key_;
    return testing::call(api_ports_[api], r);
  }
  std::string content(int api, const std::string& vol, const std::string& path) {
    auto r = call(api, "GET", "/v1/volumes/" + vol + "/files/content?path=" + path);
    if (r.status != 200) return "<" + std::to_string(r.status) + " " + r.body + ">";
    return testing::dechunk(r.body).value_or("<cut>");
  }
  // `cmd` in sandbox `id`, through its node's data plane: its stdout.
  std::string run(int api, const std::string& id, const std::vector<std::string>& cmd,
                  const std::string& user = "") {
    auto s = client(apiUrl(api), key_).post("/v1/sandboxes/" + id + "/sessions", json::object{});
    if (!s.ok()) return "session: " + s.error().message();
    auto dp = client(testing::str(*s, "data_url"), testing::str(*s, "token"));
    json::array argv;
    for (const auto& a : cmd) argv.emplace_back(a);
    json::object body{{"cmd", std::move(argv)}};
    if (!user.empty()) body["user"] = user;
    auto r = dp.request("POST", "/v1/exec", json::serialize(body), "application/json");
    if (!r.ok()) return "exec: " + r.error().message();
    std::string out;
    for (const auto& e : testing::parseSse(r->body))
      if (e.type == "stdout") out += testing::unbase64(testing::str(e.data, "data"));
    return out;
  }
  int nodeIndex(const std::string& name) { return name.empty() ? -1 : name.back() - '0'; }
};

TEST_F(ClusterVolumesTest, AVolumeLivesOnOneNodeAndIsReachedThroughAnyReplica) {
  // Every node keeps volumes (root, vessel-volume-server next to vesseld):
  // its heartbeat says how much room it has.
  ASSERT_TRUE(waitUntil([&] {
    auto rows = nodeRows();
    if (rows.size() != kNodes) return false;
    for (const auto& [n, r] : rows)
      if (r.volume_free_mib == 0) return false;
    return true;
  })) << logs();

  auto made = call(0, "POST", "/v1/volumes", R"({"name":"data","size_mib":64})");
  ASSERT_EQ(made.status, 201) << made.body << logs();
  const std::string node = volumeNode(*store_, "data");
  ASSERT_FALSE(node.empty());
  const int n = nodeIndex(node);
  ASSERT_GE(n, 0);
  const std::string id = testing::str(made.js(), "id");
  EXPECT_TRUE(
      std::filesystem::exists(dir_->path() + "/" + node + "/volumes/images/" + id + ".img"));
  for (int other = 0; other < kNodes; ++other)
    if (other != n)
      EXPECT_FALSE(std::filesystem::exists(dir_->path() + "/node" + std::to_string(other) +
                                           "/volumes/images/" + id + ".img"));

  // Files through the other replica: small and streamed (3 MiB), and
  // directories.
  ASSERT_EQ(call(0, "POST", "/v1/volumes/data/files:mkdir", R"({"path":"/notes"})").status, 204);
  auto put =
      call(1, "PUT", "/v1/volumes/data/files/content?path=/notes/hi.txt", "hello, cluster\n");
  ASSERT_EQ(put.status, 201) << put.body << logs();
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4096);
  ASSERT_EQ(call(1, "PUT", "/v1/volumes/data/files/content?path=/big.bin", big).status, 201);
  ASSERT_EQ(
      call(0, "POST", "/v1/volumes/data/files:mkdir", R"({"path":"/shared","mode":493})").status,
      204);
  EXPECT_EQ(content(0, "data", "/big.bin"), big);
  auto listed = call(0, "GET", "/v1/volumes/data/files?path=/notes");
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_EQ(listed.js().at("entries").as_array().size(), 1u);
  EXPECT_EQ(testing::str(listed.js().at("entries").as_array()[0], "path"), "/notes/hi.txt");
  auto got = call(1, "GET", "/v1/volumes/data");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_TRUE(got.js().at("mounted").as_bool()) << got.body;
  EXPECT_GE(got.js().at("used_bytes").as_int64(), 3 << 20);
  EXPECT_EQ(call(0, "GET", "/v1/volumes/data/files?path=/none").status, 404);
  EXPECT_EQ(call(0, "GET", "/v1/volumes/data/files?path=/../..").status, 400);

  // A sandbox mounting it runs on its node and sees its files.
  const std::string at = dir_->path() + "/in-sandbox/data";
  json::object want{{"volumes", json::array{json::object{{"name", "data"}, {"path", at}}}}};
  auto sb = client(apiUrl(0), key_).post("/v1/sandboxes", want);
  ASSERT_TRUE(sb.ok()) << sb.error().message();
  const std::string sid = testing::str(sb->at("sandbox"), "id");
  const std::string op = testing::str(sb->at("operation"), "id");
  ASSERT_TRUE(waitUntil([&] { return finished(0, op); }, 60s));
  ASSERT_EQ(opState(0, op), "done") << opJson(0, op) << logs();
  EXPECT_EQ(row(sid)->node, node);
  // As root: the fake "VM" sees the host's tree, whose scratch directory
  // (mkdtemp, 0700) the guest's user cannot enter.
  EXPECT_EQ(run(1, sid, {"/bin/cat", at + "/notes/hi.txt"}, "root"), "hello, cluster\n") << logs();
  EXPECT_EQ(
      run(0, sid, {"/bin/sh", "-c", "echo from-the-sandbox > " + at + "/shared/out.txt"}, "root"),
      "");
  EXPECT_EQ(content(1, "data", "/shared/out.txt"), "from-the-sandbox\n");

  // Mounted: its delete waits for the sandbox; then its image goes.
  EXPECT_EQ(call(1, "DELETE", "/v1/volumes/data").status, 409);
  auto del = client(apiUrl(1), key_).del("/v1/sandboxes/" + sid);
  ASSERT_TRUE(del.ok()) << del.error().message();
  const std::string dop = testing::str(del->at("operation"), "id");
  ASSERT_TRUE(waitUntil([&] { return finished(1, dop); }, 60s));
  ASSERT_EQ(call(1, "DELETE", "/v1/volumes/data").status, 204);
  EXPECT_FALSE(
      std::filesystem::exists(dir_->path() + "/" + node + "/volumes/images/" + id + ".img"));
  EXPECT_EQ(call(0, "GET", "/v1/volumes/data").status, 404);
}

TEST_F(ClusterVolumesTest, ANodeThatIsDownTakesItsVolumesUntilItIsBack) {
  ASSERT_TRUE(waitUntil([&] {
    auto rows = nodeRows();
    for (const auto& [name, r] : rows)
      if (r.volume_free_mib == 0) return false;
    return rows.size() == kNodes;
  })) << logs();
  ASSERT_EQ(call(0, "POST", "/v1/volumes", R"({"name":"kept","size_mib":32})").status, 201);
  ASSERT_EQ(call(0, "PUT", "/v1/volumes/kept/files/content?path=/f", "still here").status, 201);
  const std::string node = volumeNode(*store_, "kept");
  const int n = nodeIndex(node);
  ASSERT_GE(n, 0);
  ASSERT_TRUE(nodes_[n].signal(SIGKILL).ok());
  (void)nodes_[n].waitFor(std::chrono::seconds(10));
  // 503 at once (its node does not answer), and once the replicas find
  // its heartbeat too old, without asking it: naming the node.
  auto first = call(1, "GET", "/v1/volumes/kept/files?path=/");
  EXPECT_EQ(first.status, 503) << first.body;
  testing::Reply down;
  ASSERT_TRUE(waitUntil([&] {
    down = call(1, "GET", "/v1/volumes/kept/files?path=/");
    return down.body.find("node " + node + ", which is down") != std::string::npos;
  })) << down.status
      << " " << down.body;
  EXPECT_EQ(down.status, 503);
  EXPECT_EQ(content(0, "kept", "/f").substr(0, 4), "<503");
  EXPECT_EQ(call(0, "DELETE", "/v1/volumes/kept").status, 503);  // its image would be left
  // The record stays (a list reads the store); a sandbox mounting it
  // cannot run anywhere else.
  EXPECT_EQ(call(0, "GET", "/v1/volumes").status, 200);
  json::object want{
      {"volumes", json::array{json::object{{"name", "kept"}, {"path", "/mnt/kept"}}}}};
  auto sb = client(apiUrl(0), key_).post("/v1/sandboxes", want);
  ASSERT_TRUE(sb.ok()) << sb.error().message();
  const std::string op = testing::str(sb->at("operation"), "id");
  ASSERT_TRUE(waitUntil([&] { return finished(0, op); }, 60s));
  EXPECT_EQ(opState(0, op), "failed");
  EXPECT_NE(opJson(0, op).find("node " + node), std::string::npos) << opJson(0, op);
  // Back: it mounts its volumes again at start, and their files are there.
  ASSERT_TRUE(startNode(n)) << logs();
  EXPECT_TRUE(waitUntil([&] { return content(1, "kept", "/f") == "still here"; })) << logs();
}

}  // namespace
}  // namespace vessel::cluster_e2e
