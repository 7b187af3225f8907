// Many machines, E2B's envd through the API replicas (issue 15): envd
// requests reach the node of the sandbox they name, network changes and
// usage are the node's answers, and the reaper runs on one replica only.
// The cluster is cluster_e2e_fixture.h's. Needs root.
#include "cluster_e2e_fixture.h"

namespace vessel::cluster_e2e {
namespace {

std::string percentEncoded(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", c);
      out += b;
    }
  }
  return out;
}

// One keep-alive connection to a replica's envd listener, as an E2B SDK
// holds one to E2B_SANDBOX_URL: each request is answered by the envd of
// the node running the sandbox it names.
class EnvdConnection {
 public:
  explicit EnvdConnection(uint16_t port) : sock_(io_) {
    sock_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  }
  boost::beast::http::response<boost::beast::http::string_body> send(
      boost::beast::http::request<boost::beast::http::string_body> req) {
    if (req[boost::beast::http::field::host].empty())
      req.set(boost::beast::http::field::host, "127.0.0.1");
    req.prepare_payload();
    boost::beast::http::write(sock_, req);
    boost::beast::http::response<boost::beast::http::string_body> res;
    boost::system::error_code ec;
    boost::beast::http::read(sock_, buf_, res, ec);
    if (ec) res.result(0);
    return res;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket sock_;
  boost::beast::flat_buffer buf_;
};

boost::beast::http::request<boost::beast::http::string_body> envdCall(const std::string& target,
                                                                      const std::string& id,
                                                                      const std::string& token,
                                                                      const std::string& ctype,
                                                                      std::string body) {
  boost::beast::http::request<boost::beast::http::string_body> r{boost::beast::http::verb::post,
                                                                 target, 11};
  if (!id.empty()) r.set("E2b-Sandbox-Id", id);
  if (!token.empty()) r.set("X-Access-Token", token);
  r.set(boost::beast::http::field::authorization, "Basic cm9vdDo=");  // root
  r.set(boost::beast::http::field::content_type, ctype);
  r.body() = std::move(body);
  return r;
}

// E2B on many machines: envd requests through a replica reach the node of
// the sandbox they name (by header, by Host, by a signed URL's signature),
// interleaved on one connection, with tokens any replica hands out; a
// network change and usage through a replica are the node's answers; and
// the reaper runs on exactly one replica, then on the other once it dies.
TEST_F(ClusterTest, EnvdNetworkUsageAndTheReaperThroughReplicas) {
  std::vector<std::string> ids;
  std::map<std::string, std::string> token;
  for (int i = 0; i < kNodes; ++i) {
    // Through one replica: it spreads a burst before the nodes report it.
    auto [id, op] = create(0);
    ASSERT_TRUE(waitUntil([&] { return finished(0, op); })) << logs();
    ASSERT_EQ(opState(0, op), "done") << logs();
    ids.push_back(id);
    // The token from either replica: every process shares the key.
    auto got = e2b(i % kApis, "GET", "/sandboxes/" + id);
    ASSERT_EQ(got.status, 200) << got.body;
    token[id] = testing::str(got.js(), "envdAccessToken");
  }
  std::set<std::string> nodes;
  for (const auto& id : ids) nodes.insert(row(id)->node);
  ASSERT_EQ(nodes.size(), 3u) << "one sandbox per node";

  EnvdConnection conn(envd_ports_[0]);
  const std::string files = dir_->path() + "/envd-files";
  std::filesystem::create_directories(files);
  for (int round = 0; round < 2; ++round)
    for (const auto& id : ids) {
      // A Connect unary call.
      auto st = conn.send(envdCall("/filesystem.Filesystem/Stat", id, token[id], "application/json",
                                   R"({"path":"/"})"));
      ASSERT_EQ(st.result_int(), 200) << id << ": " << st.body() << logs();
      EXPECT_NE(st.body().find("\"entry\""), std::string::npos) << st.body();
      // A server stream: the process's output, then its end.
      json::object start{
          {"process",
           json::object{{"cmd", "/bin/sh"}, {"args", json::array{"-c", "echo started; exit 7"}}}}};
      auto ps =
          conn.send(envdCall("/process.Process/Start", id, token[id], "application/connect+json",
                             e2b::envd::encodeEnvelope(0, json::serialize(start))));
      ASSERT_EQ(ps.result_int(), 200) << ps.body();
      EXPECT_NE(ps.body().find("exit status 7"), std::string::npos) << ps.body();
    }
  // A wrong token is refused by the node, as on one machine.
  auto wrong = conn.send(envdCall("/filesystem.Filesystem/Stat", ids[0], token[ids[1]],
                                  "application/json", R"({"path":"/"})"));
  EXPECT_EQ(wrong.result_int(), 401) << wrong.body();
  // Named by Host: an upload, then a download by a signed URL (which must
  // name its sandbox too), through the other replica.
  {
    EnvdConnection other(envd_ports_[1]);
    const std::string& id = ids[2];
    std::string path = files + "/by-" + id;
    std::string mp =
        "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\nfrom " +
        id + "\r\n--XyZ--\r\n";
    auto up = envdCall("/files?username=root&path=" + percentEncoded(path), "", token[id],
                       "multipart/form-data; boundary=XyZ", mp);
    up.set(boost::beast::http::field::host, "49983-" + id + ".vessel.test");
    auto put = other.send(std::move(up));
    ASSERT_EQ(put.result_int(), 200) << put.body() << logs();
    std::string sig = e2b::envd::fileSignature(path, "read", "root", token[id], std::nullopt);
    boost::beast::http::request<boost::beast::http::string_body> get{
        boost::beast::http::verb::get,
        "/files?path=" + percentEncoded(path) + "&username=root&signature=" + percentEncoded(sig),
        11};
    // Naming no sandbox, it is refused where it arrived: no replica tries
    // the tokens of every live sandbox (issue 25).
    auto nameless = get;
    auto refused = other.send(std::move(nameless));
    EXPECT_EQ(refused.result_int(), 400) << refused.body();
    get.set(boost::beast::http::field::host, "49983-" + id + ".vessel.test");
    auto got = other.send(std::move(get));
    ASSERT_EQ(got.result_int(), 200) << got.body();
    EXPECT_EQ(got.body(), "from " + id);
  }

  // Network settings and usage, through either replica, from the node.
  {
    auto r = client(apiUrl(1), key_)
                 .put("/v1/sandboxes/" + ids[0] + "/network", json::object{{"mode", "none"}});
    ASSERT_TRUE(r.ok()) << r.error().message() << logs();
    EXPECT_EQ(testing::str(*r, "mode"), "none");
    // The node runs without egress: only "none" (its refusal, not the replica's).
    auto full = client(apiUrl(0), key_)
                    .put("/v1/sandboxes/" + ids[0] + "/network", json::object{{"mode", "full"}});
    ASSERT_FALSE(full.ok());
    EXPECT_NE(full.error().message().find("without egress"), std::string::npos)
        << full.error().message();
    auto m = e2b(0, "GET", "/sandboxes/" + ids[1] + "/metrics");
    ASSERT_EQ(m.status, 200) << m.body << logs();
    ASSERT_TRUE(m.js().is_array() && m.js().as_array().size() == 1) << m.body;
    EXPECT_GT(m.js().as_array()[0].as_object().at("memUsed").to_number<double>(), 0) << m.body;
  }

  // The reaper: exactly one replica runs it.
  int reaper = -1;
  ASSERT_TRUE(waitUntil([&] {
    auto a = reaperOf(0), b = reaperOf(1);
    if (a == "reaper" && b == "not") reaper = 0;
    if (a == "not" && b == "reaper") reaper = 1;
    return reaper >= 0;
  })) << logs();
  auto shortLived = [&](int api) {
    auto r = client(apiUrl(api), key_).post("/v1/sandboxes", json::object{{"lifetime", 2}});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
    return r.ok() ? testing::str(r->at("sandbox"), "id") : std::string();
  };
  std::string first = shortLived(1 - reaper);
  ASSERT_TRUE(waitUntil([&] { return row(first)->state == store::SandboxState::kDeleted; }))
      << logs();
  EXPECT_EQ(expiredEvents(first), 1);
  // The reaping replica dies; the other takes over once it is silent.
  (void)apis_[reaper].signal(SIGKILL);
  (void)apis_[reaper].waitFor(10s);
  int other = 1 - reaper;
  std::string second = shortLived(other);
  ASSERT_TRUE(waitUntil([&] { return row(second)->state == store::SandboxState::kDeleted; }))
      << logs();
  EXPECT_EQ(expiredEvents(second), 1);
  EXPECT_EQ(reaperOf(other), "reaper");

  // A process stream through the surviving replica whose node dies under
  // it: the client's connection is cut, with no end of the stream, as
  // envd's own would be (the SDK then reports the sandbox gone).
  {
    const std::string& id = ids[0];
    int victim = -1;
    for (int i = 0; i < kNodes; ++i)
      if (row(id)->node == nodeName(i)) victim = i;
    ASSERT_GE(victim, 0);
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket sock(io);
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), envd_ports_[other]});
    json::object start{
        {"process",
         json::object{{"cmd", "/bin/sh"}, {"args", json::array{"-c", "echo up; exec sleep 60"}}}}};
    auto req = envdCall("/process.Process/Start", id, token[id], "application/connect+json",
                        e2b::envd::encodeEnvelope(0, json::serialize(start)));
    req.set(boost::beast::http::field::host, "127.0.0.1");
    req.prepare_payload();
    boost::beast::http::write(sock, req);
    boost::beast::flat_buffer buf;
    boost::beast::http::response_parser<boost::beast::http::string_body> p;
    boost::beast::http::read_header(sock, buf, p);
    ASSERT_EQ(p.get().result_int(), 200);
    // The output arrives while the process runs: the stream is open.
    while (p.get().body().find("start") == std::string::npos)
      boost::beast::http::read_some(sock, buf, p);
    (void)nodes_[victim].signal(SIGKILL);
    (void)nodes_[victim].waitFor(10s);
    boost::system::error_code ec;
    boost::beast::http::read(sock, buf, p, ec);
    EXPECT_TRUE(ec) << "the stream ended cleanly although its node died";
    EXPECT_FALSE(p.is_done());
  }
}

// Templates in a cluster: the API replicas hold no template files (the
// catalogue is in the store); a template on one node only is copied to
// another on first use and checked; a corrupted source is refused with
// nothing installed; a fork into a template through a replica runs on the
// sandbox's node, and the other replica creates from it at once. (Builds
// through a replica: ClusterNodeTest; the fake hypervisor cannot build.)
}  // namespace
}  // namespace vessel::cluster_e2e
