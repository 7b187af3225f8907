// A flag means the same in every role: vesseld is started as each role
// with the same flags (--print-config: the settings the role resolved, by
// the same functions its stacks are built from, then exit) and the stacks
// each role shares are compared. Also: --hypervisor=fake exists only in
// the test binary.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace vessel::vesseld {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

struct Outcome {
  int status = -1;  // exit status
  std::string out;  // stdout and stderr
};

// `bin` with `args` (no spaces or quotes in them: the test writes them).
Outcome run(const std::string& bin, const std::vector<std::string>& args) {
  std::string cmd = bin;
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  Outcome r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class VesseldRolesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/vesseld-roles-" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ + "/node-token") << "roles-test-node-token-0123456789\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Every flag a stack reads, none at its default.
  std::vector<std::string> flags(const std::string& role) const {
    return {"--role=" + role,
            "--print-config",
            "--kernel=/etc/hostname",
            "--minimal-image=/etc/hostname",
            "--store=postgres://vessel@db.invalid/vessel",
            "--state-dir=" + dir_ + "/state",
            "--cache-dir=" + dir_ + "/cache",
            "--node-token-file=" + dir_ + "/node-token",
            "--node-name=n1",
            "--node-listen=127.0.0.1:5555",
            "--node-lost-after=9",
            "--qemu=/usr/bin/qemu-system-x86_64",
            "--accel=tcg",
            "--no-jail",
            "--vm-uid-range=300000-300100",
            "--uid-lease-dir=" + dir_ + "/uids",
            "--vm-memory-overhead=99",
            "--agent-reply-timeout=7",
            "--warm-pool=minimal=1",
            "--warm-pool-budget=512",
            "--egress-resolver=192.0.2.53",
            "--egress-gateway-netns=gw-ns",
            "--egress-upstream-netns=up-ns",
            "--default-network=full",
            "--allow-public-suffix-wildcards",
            "--min-free-disk-mib=77",
            "--max-disk-mib=4096",
            "--tenant-max-sandboxes=3",
            "--tenant-max-memory=1024",
            "--tenant-max-vcpus=5",
            "--tenant-max-disk=2048",
            "--default-idle-timeout=11",
            "--default-lifetime=100",
            "--max-lifetime=200",
            "--stop-vms-on-exit",
            "--listen=127.0.0.1:1111",
            "--data-listen=127.0.0.1:2222",
            "--data-url=http://10.0.0.1:2222",
            "--console-dir=" + dir_ + "/console",
            "--e2b-listen=127.0.0.1:3333",
            "--e2b-envd-listen=127.0.0.1:4444",
            "--e2b-sandbox-domain=sb.example",
            "--log-level=warn"};
  }
  json::object settings(const std::string& role) {
    Outcome r = run(VESSELD_PATH, flags(role));
    EXPECT_EQ(r.status, 0) << r.out;
    json::error_code ec;
    json::value v = json::parse(r.out, ec);
    EXPECT_FALSE(ec) << r.out;
    EXPECT_TRUE(v.is_object()) << r.out;
    return v.is_object() ? v.as_object() : json::object{};
  }

  std::string dir_;
};

TEST_F(VesseldRolesTest, EveryRoleResolvesTheSameFlagsTheSameWay) {
  json::object all = settings("all"), node = settings("node"), api = settings("api");
  ASSERT_TRUE(all["node"].is_object());
  ASSERT_TRUE(all["api"].is_object());
  ASSERT_TRUE(node["node"].is_object());
  ASSERT_TRUE(api["api"].is_object());
  // Each role runs only its stacks.
  EXPECT_TRUE(node["api"].is_null());
  EXPECT_TRUE(api["node"].is_null());
  // The node stack: identical in --role=all and --role=node.
  EXPECT_EQ(json::serialize(all["node"]), json::serialize(node["node"]));
  // The API stack: identical in --role=all and --role=api, except where
  // the lifecycle checks the state disk (one machine only: on a cluster
  // the node's own checks refuse).
  json::object all_api = all["api"].as_object(), api_api = api["api"].as_object();
  EXPECT_EQ(all_api["lifecycle_min_free_disk_mib"].as_int64(), 77);
  EXPECT_EQ(api_api["lifecycle_min_free_disk_mib"].as_int64(), 0);
  all_api.erase("lifecycle_min_free_disk_mib");
  api_api.erase("lifecycle_min_free_disk_mib");
  EXPECT_EQ(json::serialize(all_api), json::serialize(api_api));
  // The cluster roles' shared settings.
  EXPECT_EQ(json::serialize(node["cluster"]), json::serialize(api["cluster"]));
  EXPECT_FALSE(all.contains("cluster"));

  // And the values are the flags' (not a default any role fell back to).
  const json::object& n = node["node"].as_object();
  EXPECT_EQ(n.at("agent_reply_timeout_s").as_int64(), 7);
  EXPECT_EQ(n.at("warm_pools").as_object().at("minimal").as_int64(), 1);
  EXPECT_EQ(n.at("warm_pool_budget_mib").as_object().at("minimal").as_int64(), 512);
  EXPECT_EQ(n.at("vm_memory_overhead_mib").as_int64(), 99);
  EXPECT_EQ(n.at("min_free_disk_mib").as_int64(), 77);
  EXPECT_EQ(n.at("default_network").as_string(), "full");
  EXPECT_TRUE(n.at("allow_public_suffix_wildcards").as_bool());
  EXPECT_TRUE(n.at("stop_vms_on_exit").as_bool());
  EXPECT_FALSE(n.at("jail").as_bool());
  EXPECT_EQ(n.at("accel").as_string(), "tcg");
  EXPECT_EQ(n.at("egress_resolver").as_string(), "192.0.2.53");
  EXPECT_EQ(n.at("data_listen").as_string(), "127.0.0.1:2222");
  EXPECT_EQ(n.at("data_url").as_string(), "http://10.0.0.1:2222");
  EXPECT_EQ(n.at("e2b_envd_listen").as_string(), "127.0.0.1:4444");
  const json::object& a = api["api"].as_object();
  EXPECT_EQ(a.at("default_idle_timeout_s").as_int64(), 11);
  EXPECT_EQ(a.at("default_lifetime_s").as_int64(), 100);
  EXPECT_EQ(a.at("max_lifetime_s").as_int64(), 200);
  EXPECT_EQ(a.at("tenant_max_sandboxes").as_int64(), 3);
  EXPECT_EQ(a.at("tenant_max_memory_mib").as_int64(), 1024);
  EXPECT_EQ(a.at("tenant_max_vcpus").as_int64(), 5);
  EXPECT_EQ(a.at("tenant_max_disk_mib").as_int64(), 2048);
  EXPECT_EQ(a.at("max_disk_mib").as_int64(), 4096);
  EXPECT_EQ(a.at("listen").as_string(), "127.0.0.1:1111");
  EXPECT_EQ(a.at("e2b_listen").as_string(), "127.0.0.1:3333");
  EXPECT_EQ(a.at("e2b_sandbox_domain").as_string(), "sb.example");
  EXPECT_EQ(a.at("console_dir").as_string(), dir_ + "/console");
  EXPECT_EQ(a.at("node_lost_after_s").as_int64(), 9);
  const json::object& c = api["cluster"].as_object();
  EXPECT_EQ(c.at("node_name").as_string(), "n1");
  EXPECT_EQ(c.at("node_advertise").as_string(), "http://127.0.0.1:5555");
}

TEST_F(VesseldRolesTest, TheFakeHypervisorExistsOnlyInTheTestBinary) {
  auto args = flags("node");
  args.push_back("--hypervisor=fake");
  Outcome prod = run(VESSELD_PATH, args);
  EXPECT_EQ(prod.status, 2) << prod.out;
  EXPECT_NE(prod.out.find("hypervisor 'fake' is not supported (supported: qemu)"),
            std::string::npos)
      << prod.out;
  // The production binary does not even know the fake's flag.
  auto with_agent = flags("all");
  with_agent.push_back("--fake-agent=/etc/hostname");
  Outcome flag = run(VESSELD_PATH, with_agent);
  EXPECT_NE(flag.status, 0) << flag.out;
  EXPECT_NE(flag.out.find("--fake-agent"), std::string::npos) << flag.out;
  // The test binary has it, with its own checks (a jailed fake is refused).
  Outcome jailed =
      run(VESSELD_FAKE_PATH,
          {"--role=node", "--print-config", "--hypervisor=fake", "--fake-agent=/etc/hostname",
           "--kernel=/etc/hostname", "--minimal-image=/etc/hostname",
           "--store=postgres://vessel@db.invalid/vessel", "--state-dir=" + dir_ + "/state",
           "--node-token-file=" + dir_ + "/node-token", "--node-name=n1"});
  EXPECT_EQ(jailed.status, 2) << jailed.out;
  EXPECT_NE(jailed.out.find("--no-jail and --no-egress"), std::string::npos) << jailed.out;
  args.push_back("--fake-agent=/etc/hostname");
  args.push_back("--no-egress");
  Outcome fake = run(VESSELD_FAKE_PATH, args);
  ASSERT_EQ(fake.status, 0) << fake.out;
  EXPECT_NE(fake.out.find("\"hypervisor\":\"fake\""), std::string::npos) << fake.out;
}

}  // namespace
}  // namespace vessel::vesseld
