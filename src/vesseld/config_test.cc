#include "vesseld/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "http/testing/test_pki.h"

namespace vessel::vesseld {
namespace {

// The api and node roles need a shared store and the node API's secret.
TEST(ConfigTest, RolesNeedPostgresAndTheNodeToken) {
  EXPECT_EQ(*parseRole("api"), Role::kApi);
  EXPECT_EQ(roleName(Role::kNode), "node");
  EXPECT_FALSE(parseRole("both").ok());
  ::unsetenv("VESSEL_NODE_TOKEN");
  Config c;
  c.kernel = c.minimal_image = "/etc/hostname";
  c.state_dir = "/tmp/x";
  c.role = Role::kNode;
  auto s = c.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("--store=postgres://"), std::string::npos)
      << s.error().message();
  c.store = "postgres://vessel@db/vessel";
  s = c.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("VESSEL_NODE_TOKEN"), std::string::npos);
  ::setenv("VESSEL_NODE_TOKEN", "0123456789abcdef-secret\n", 1);
  c.node_name = "host-1";
  ASSERT_TRUE(c.validate().ok()) << c.validate().error().message();
  EXPECT_EQ(c.node_token, "0123456789abcdef-secret");
  EXPECT_EQ(c.node_advertise, "http://127.0.0.1:8091");
  c.node_name = "no/slash";
  EXPECT_FALSE(c.validate().ok());
  // An API replica boots nothing: it needs no guest kernel or image.
  Config api;
  api.role = Role::kApi;
  api.state_dir = "/tmp/x";
  api.store = "postgres://vessel@db/vessel";
  EXPECT_TRUE(api.validate().ok()) << api.validate().error().message();
  api.role = Role::kNode;
  api.node_name = "host-2";
  EXPECT_FALSE(api.validate().ok());
  ::unsetenv("VESSEL_NODE_TOKEN");
  // The test-only fake hypervisor's own checks: vesseld/testing/fake_machine_test.cc.
}

// Per-node tokens (issue 24): a replica reads every node's from
// --node-tokens-file; with only --node-token-file every node shares that
// one; a node holds its own only and is refused the replicas' file.
TEST(ConfigTest, ReplicasReadEachNodesTokenNodesOnlyTheirOwn) {
  ::unsetenv("VESSEL_NODE_TOKEN");
  auto dir = std::filesystem::temp_directory_path() / ("config-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string all = (dir / "node-tokens").string(), own = (dir / "node-token").string();
  std::ofstream(all) << "n1 token-of-n1-0123456789\nn2 token-of-n2-0123456789\n";
  std::ofstream(own) << "token-of-n1-0123456789\n";
  Config api;
  api.role = Role::kApi;
  api.state_dir = "/tmp/x";
  api.store = "postgres://vessel@db/vessel";
  auto s = api.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("--node-tokens-file"), std::string::npos)
      << s.error().message();
  api.node_tokens_file = all;
  ASSERT_TRUE(api.validate().ok()) << api.validate().error().message();
  EXPECT_TRUE(api.node_tokens.perNode());
  EXPECT_EQ(api.node_tokens.forNode("n2"), "token-of-n2-0123456789");
  EXPECT_EQ(api.node_tokens.forNode("n3"), "");
  Config shared = api;
  shared.node_tokens_file.clear();
  shared.node_token_file = own;
  ASSERT_TRUE(shared.validate().ok()) << shared.validate().error().message();
  EXPECT_FALSE(shared.node_tokens.perNode());
  EXPECT_EQ(shared.node_tokens.forNode("n3"), "token-of-n1-0123456789");
  Config node = shared;
  node.role = Role::kNode;
  node.kernel = node.minimal_image = "/etc/hostname";
  node.node_name = "n1";
  ASSERT_TRUE(node.validate().ok()) << node.validate().error().message();
  EXPECT_EQ(node.node_token, "token-of-n1-0123456789");
  node.node_tokens_file = all;
  auto refused = node.validate();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("only its own"), std::string::npos)
      << refused.error().message();
  std::ofstream(all) << "n1 short\n";
  api.node_tokens = {};
  EXPECT_FALSE(api.validate().ok());
  std::filesystem::remove_all(dir);
}

TEST(ConfigTest, ValidateNamesTheBadField) {
  Config c;
  c.kernel = "/nonexistent/vmlinux";
  c.minimal_image = "/etc/hostname";
  auto s = c.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kNotFound);
  EXPECT_NE(s.error().message().find("kernel /nonexistent/vmlinux"), std::string::npos);
  c.kernel = "/etc/hostname";
  c.state_dir = "relative";
  EXPECT_FALSE(c.validate().ok());
  c.state_dir = "/tmp/x";
  EXPECT_TRUE(c.validate().ok());
  EXPECT_EQ(c.listen_addr.port, 8080);
  EXPECT_EQ(c.data_listen_addr.port, 8081);
  EXPECT_EQ(c.data_url, "http://127.0.0.1:8081");
  ASSERT_TRUE(c.e2b_listen_addr.has_value());
  EXPECT_EQ(c.e2b_listen_addr->port, 3000);
  c.e2b_listen = "";  // off
  EXPECT_TRUE(c.validate().ok());
  EXPECT_FALSE(c.e2b_listen_addr.has_value());
  c.e2b_listen = "localhost:3000";
  auto e = c.validate();
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("--e2b-listen"), std::string::npos);
  c.e2b_listen = "127.0.0.1:3000";
  c.data_listen = "nohost";
  EXPECT_FALSE(c.validate().ok());
  c.data_listen = "127.0.0.1:8081";
  c.store = "postgres://vessel:pw@db:5432/vessel";
  EXPECT_TRUE(c.validate().ok());
  c.store = "postgresql:///vessel?host=/run/postgresql";
  EXPECT_TRUE(c.validate().ok());
  c.store = "mysql://db/vessel";
  auto bad = c.validate();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("--store"), std::string::npos);
}

// from_image builds' limits (docs/templates.md).
TEST(ConfigTest, ImageBuildFlagsAreChecked) {
  Config c;
  c.kernel = c.minimal_image = "/etc/hostname";
  c.state_dir = "/tmp/x";
  EXPECT_EQ(c.max_image_mib, 4096);
  c.insecure_registries = {"registry.lan:5000"};
  EXPECT_TRUE(c.validate().ok());
  c.max_image_mib = 0;
  auto s = c.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("--max-image-mib"), std::string::npos);
  c.max_image_mib = 100;
  c.build_cache_mib = -1;
  auto b = c.validate();
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message().find("--build-cache-mib"), std::string::npos);
  c.build_cache_mib = 0;
  EXPECT_TRUE(c.validate().ok());
  c.max_concurrent_builds = 0;
  auto m = c.validate();
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("--max-concurrent-builds"), std::string::npos);
  c.max_concurrent_builds = 2;
  c.insecure_registries = {"http://registry.lan/x"};
  auto r = c.validate();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("--insecure-registry takes HOST:PORT"), std::string::npos);
}

TEST(ConfigTest, E2bEnvdListenerDefaultsOnAndEmptyTurnsItOff) {
  Config c;
  c.kernel = "/etc/hostname";
  c.minimal_image = "/etc/hostname";
  c.state_dir = "/tmp/x";
  ASSERT_TRUE(c.validate().ok());
  ASSERT_TRUE(c.e2b_envd_listen_addr.has_value());
  EXPECT_EQ(c.e2b_envd_listen_addr->port, 49983);
  c.e2b_envd_listen = "";
  ASSERT_TRUE(c.validate().ok());
  EXPECT_FALSE(c.e2b_envd_listen_addr.has_value());
  c.e2b_envd_listen = "127.0.0.1";
  auto s = c.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("--e2b-envd-listen"), std::string::npos);
}

TEST(ConfigTest, WarmPools) {
  auto p = parseWarmPool("minimal=2,debian=1,,my-t.1=0");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->size(), 3u);
  EXPECT_EQ(p->at("minimal"), 2u);
  EXPECT_EQ(p->at("debian"), 1u);
  EXPECT_EQ(p->at("my-t.1"), 0u);
  EXPECT_TRUE(parseWarmPool("")->empty());
  EXPECT_TRUE(parseWarmPool("none")->empty());
  for (const char* bad : {"minimal", "minimal=", "=2", "minimal=x", "minimal=-1", "minimal=65",
                          "Mini=1", "minimal=2x", "a b=1"}) {
    auto r = parseWarmPool(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << bad;
  }
  Config c;
  c.kernel = c.minimal_image = "/etc/hostname";
  c.warm_pool = "minimal=9";
  ASSERT_TRUE(c.validate().ok());
  EXPECT_EQ(c.warm_pool_sizes.at("minimal"), 9u);
  c.warm_pool = "minimal=100";
  auto v = c.validate();
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.error().message(), ::testing::HasSubstr("--warm-pool"));
}

TEST(ConfigTest, WarmPoolBudget) {
  auto b = parseWarmPoolBudget("1024,debian=4096");
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(b->forTemplate("minimal"), 1024u);
  EXPECT_EQ(b->forTemplate("debian"), 4096u);
  auto only = parseWarmPoolBudget("minimal=512");
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->forTemplate("minimal"), 512u);
  EXPECT_EQ(only->forTemplate("debian"), 0u);
  EXPECT_EQ(parseWarmPoolBudget("none")->forTemplate("minimal"), 0u);
  for (const char* bad : {"x", "=5", "minimal=", "minimal=-1", "Mini=1", "5M", "2000000"}) {
    auto r = parseWarmPoolBudget(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << bad;
  }
  Config c;
  c.kernel = c.minimal_image = "/etc/hostname";
  c.warm_pool_budget = "minimal=x";
  auto v = c.validate();
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.error().message(), ::testing::HasSubstr("--warm-pool-budget"));
  c.warm_pool_budget = "768";
  ASSERT_TRUE(c.validate().ok());
  EXPECT_EQ(c.warm_pool_budgets.forTemplate("minimal"), 768u);
}

// Plain HTTP stays the default on loopback only: a listener clients reach
// from elsewhere needs TLS or an explicit --allow-plain-http.
TEST(ConfigTest, PlainHttpOffLoopbackIsRefusedUnlessTlsOrAllowed) {
  Config base;
  base.kernel = base.minimal_image = "/etc/hostname";
  base.state_dir = "/tmp/x";
  ASSERT_TRUE(base.validate().ok()) << base.validate().error().message();
  EXPECT_EQ(base.data_url, "http://127.0.0.1:8081");
  for (auto [field, flag] :
       {std::pair{&Config::listen, "--listen"}, std::pair{&Config::data_listen, "--data-listen"},
        std::pair{&Config::e2b_listen, "--e2b-listen"},
        std::pair{&Config::e2b_envd_listen, "--e2b-envd-listen"}}) {
    Config c = base;
    c.data_url.clear();
    c.*field = "0.0.0.0:9999";
    auto s = c.validate();
    ASSERT_FALSE(s.ok()) << flag;
    EXPECT_THAT(s.error().message(),
                ::testing::HasSubstr(std::string(flag) + " 0.0.0.0 is reachable from other "
                                                         "machines in plain HTTP"));
    EXPECT_THAT(s.error().message(), ::testing::HasSubstr("--allow-plain-http"));
    c.allow_plain_http = true;
    EXPECT_TRUE(c.validate().ok()) << flag;
  }
  Config lo = base;
  lo.listen = "127.0.0.2:8080";  // all of 127/8 is loopback
  EXPECT_TRUE(lo.validate().ok());
}

TEST(ConfigTest, TlsPairIsLoadedAtStartAndTurnsListenersToHttps) {
  std::string dir = ::testing::TempDir() + "/config-tls-" + std::to_string(::getpid());
  http::testing::TestPki a, b;
  ASSERT_TRUE(http::testing::makeTestPki(dir + "/a", "ca-a", "a", "DNS:a.test", &a));
  ASSERT_TRUE(http::testing::makeTestPki(dir + "/b", "ca-b", "b", "DNS:b.test", &b));
  Config c;
  c.kernel = c.minimal_image = "/etc/hostname";
  c.state_dir = "/tmp/x";
  c.listen = "0.0.0.0:8080";
  c.data_listen = "0.0.0.0:8081";
  c.e2b_envd_listen = "0.0.0.0:49983";
  c.tls_cert = a.cert;
  auto s = c.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("--tls-cert and --tls-key go together"));
  c.tls_key = b.key;
  s = c.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("is not the key of certificate " + a.cert));
  c.tls_key = dir + "/missing.key";
  s = c.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("TLS key " + dir + "/missing.key"));
  c.tls_key = a.key;
  ASSERT_TRUE(c.validate().ok()) << c.validate().error().message();
  EXPECT_EQ(c.data_url, "https://0.0.0.0:8081");
  // Self-signed and a pair are one or the other.
  Config both = c;
  both.tls_self_signed = true;
  EXPECT_FALSE(both.validate().ok());
  // The node role's node API and envd listener speak TLS too (API
  // replicas verify them with --node-ca-file) and are advertised so.
  ::setenv("VESSEL_NODE_TOKEN", "0123456789abcdef-secret", 1);
  Config node = c;
  node.data_url = node.e2b_envd_advertise = "";  // derived by c.validate()
  node.role = Role::kNode;
  node.store = "postgres://vessel@db/vessel";
  node.node_name = "n1";
  node.node_listen = "10.0.0.11:8091";
  node.e2b_envd_listen = "10.0.0.11:49983";
  ASSERT_TRUE(node.validate().ok()) << node.validate().error().message();
  EXPECT_EQ(node.node_advertise, "https://10.0.0.11:8091");
  EXPECT_EQ(node.e2b_envd_advertise, "https://10.0.0.11:49983");
  Config plain = node;
  plain.tls_cert = plain.tls_key = plain.node_advertise = plain.e2b_envd_advertise = "";
  plain.data_listen = "127.0.0.1:8081";
  s = plain.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("--e2b-envd-listen 10.0.0.11"));
  plain.e2b_envd_listen = "127.0.0.1:49983";
  s = plain.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("--node-listen 10.0.0.11"));
  plain.allow_plain_http = true;
  ASSERT_TRUE(plain.validate().ok()) << plain.validate().error().message();
  EXPECT_EQ(plain.node_advertise, "http://10.0.0.11:8091");
  // The CA file replicas verify nodes with is read at start.
  node.node_ca_file = dir + "/missing.pem";
  s = node.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("--node-ca-file"));
  node.node_ca_file = a.key;  // a file with no certificate in it
  EXPECT_FALSE(node.validate().ok());
  node.node_ca_file = a.ca;
  EXPECT_TRUE(node.validate().ok()) << node.validate().error().message();
  ::unsetenv("VESSEL_NODE_TOKEN");
  std::filesystem::remove_all(dir);
}

// --tls-pair LISTENER=CERT,KEY: that listener alone speaks TLS with its
// own pair, loaded at start; malformed, unknown or repeated ones are refused.
TEST(ConfigTest, PerListenerPairsAreParsedLoadedAndCountAsTls) {
  std::string dir = ::testing::TempDir() + "/config-pairs-" + std::to_string(::getpid());
  http::testing::TestPki a, b;
  ASSERT_TRUE(http::testing::makeTestPki(dir + "/a", "ca-a", "a", "DNS:a.test", &a));
  ASSERT_TRUE(http::testing::makeTestPki(dir + "/b", "ca-b", "b", "DNS:b.test", &b));
  Config c;
  c.kernel = c.minimal_image = "/etc/hostname";
  c.state_dir = "/tmp/x";
  c.data_listen = "0.0.0.0:8081";
  c.tls_pairs = {"data=" + a.cert + "," + a.key};
  ASSERT_TRUE(c.validate().ok()) << c.validate().error().message();
  EXPECT_TRUE(c.tlsOn("data"));
  EXPECT_FALSE(c.tlsOn("api"));
  EXPECT_EQ(c.data_url, "https://0.0.0.0:8081");
  EXPECT_EQ(c.tls_pair_of.at("data").key, a.key);
  // Only that listener: another one off loopback is still plain, refused.
  Config api = c;
  api.listen = "0.0.0.0:8080";
  auto s = api.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("--tls-pair api=CERT,KEY"));
  api.tls_pairs.push_back("api=" + b.cert + "," + b.key);
  EXPECT_TRUE(api.validate().ok()) << api.validate().error().message();
  for (const std::string& bad :
       std::vector<std::string>{"data", "data=" + a.cert, "web=" + a.cert + "," + a.key,
                                "data=," + a.key, "data=" + a.cert + ","}) {
    c.tls_pairs = {bad};
    EXPECT_FALSE(c.validate().ok()) << bad;
  }
  c.tls_pairs = {"data=" + a.cert + "," + b.key};  // another certificate's key
  s = c.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("--tls-pair data"));
  c.tls_pairs = {"data=" + a.cert + "," + a.key, "data=" + b.cert + "," + b.key};
  EXPECT_FALSE(c.validate().ok());
  std::filesystem::remove_all(dir);
}

TEST(ConfigTest, SelfSignedNamesDefaultAndAreChecked) {
  Config c;
  c.kernel = c.minimal_image = "/etc/hostname";
  c.state_dir = "/tmp/x";
  c.listen = "0.0.0.0:8080";
  c.tls_names = {"vessel.example"};
  EXPECT_FALSE(c.validate().ok());  // --tls-name without --tls-self-signed
  c.tls_self_signed = true;
  c.tls_names = {"Vessel.Example", "192.0.2.7"};
  ASSERT_TRUE(c.validate().ok()) << c.validate().error().message();
  EXPECT_EQ(c.tls_names, (std::vector<std::string>{"vessel.example", "192.0.2.7"}));
  EXPECT_EQ(c.tls_ca_out, "/tmp/x/tls-ca.pem");
  c.tls_names = {"a,b"};
  EXPECT_FALSE(c.validate().ok());
  c.tls_names.clear();
  ASSERT_TRUE(c.validate().ok());
  EXPECT_THAT(c.tls_names, ::testing::Contains("localhost"));
  EXPECT_THAT(c.tls_names, ::testing::Contains("127.0.0.1"));
}

}  // namespace
}  // namespace vessel::vesseld
