// E2B's /secrets routes against the lifecycle with a fake node and a real
// SQLite store, over HTTP: every change must reach the node
// (Lifecycle::putCredential / deleteCredential), so running sandboxes that
// use the credential get it at once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "api/auth.h"
#include "base/clock.h"
#include "base/sha256.h"
#include "e2b/access_token.h"
#include "e2b/rest.h"
#include "ops/lifecycle.h"
#include "ops/testing/fake_node.h"
#include "store/store.h"
#include "templates/store.h"

namespace vessel::e2b {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using ::testing::Contains;
using ::testing::Not;
using tcp = asio::ip::tcp;

constexpr const char* kKey = "vsk_secretstest";

class RestSecretsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/e2b-secrets-" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/templates");
    auto s = store::openSqlite(dir_ + "/vessel.db", &clock_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    // The API side's key: credential values are sealed at rest (store.h).
    ASSERT_TRUE(store_->useCredentialKey(std::string(32, 'k')).ok());
    ASSERT_TRUE(store_->createTenant("t1", "one").ok());
    ASSERT_TRUE(store_->addApiKey("t1", sha256Hex(kKey)).ok());
    templates_ = std::make_unique<templates::TemplateStore>(dir_ + "/templates", "q", "k");
    installBase();
    node_ = std::make_unique<ops::testing::FakeNode>(io_);
    lc_ = std::make_unique<ops::Lifecycle>(io_, *store_, *node_, *templates_, clock_);
    rest_ = std::make_unique<RestApi>(
        *lc_, [this](std::string_view key) { return api::tenantForKey(key, *store_); }, *templates_,
        tokens_);
    rest_->install(server_);
    ASSERT_TRUE(server_.listen({"127.0.0.1", 0}).ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    asio::post(io_, [this] { server_.close(); });
    io_.stop();
    thread_.join();
    rest_.reset();
    lc_.reset();
    fs::remove_all(dir_);
  }

  // A template named `base` of a few bytes: the fake node never reads it.
  void installBase() {
    std::string staging = dir_ + "/staging";
    fs::create_directories(staging);
    templates::Manifest m;
    m.name = "base";
    m.version = "v1";
    m.spec_hash = std::string(64, 'a');
    m.qemu_version = "q";
    m.kernel_sha256 = "k";
    m.created_at = "2026-01-01T00:00:00Z";
    m.memory_mib = 256;
    for (const char* f : {templates::kRootfsFile, templates::kMemoryFile, templates::kStateFile}) {
      std::ofstream(staging + "/" + f) << f;
      m.files[f] = sha256Hex(f);
    }
    ASSERT_TRUE(templates_->install(staging, m).ok());
  }
  std::vector<std::string> ruleNames() {
    std::vector<std::string> out;
    auto all = store_->listCredentials("t1");
    EXPECT_TRUE(all.ok());
    if (all.ok())
      for (const auto& c : *all)
        if (c.name.rfind("e2b-rule-", 0) == 0) out.push_back(c.name);
    return out;
  }
  size_t changed(const std::string& name) {
    size_t n = 0;
    for (const auto& c : nodeCalls()) n += c == "credential-changed t1 " + name;
    return n;
  }

  http::Response call(http::verb method, const std::string& target, const std::string& body = "") {
    asio::io_context cio;
    tcp::socket s(cio);
    s.connect({asio::ip::make_address("127.0.0.1"), server_.port()});
    http::Request req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set("X-API-Key", kKey);
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    http::write(s, req);
    boost::beast::flat_buffer b;
    http::Response res;
    http::read(s, b, res);
    return res;
  }
  // What the node was told, read on the server's thread.
  std::vector<std::string> nodeCalls() {
    std::promise<std::vector<std::string>> p;
    asio::post(io_, [&] { p.set_value(node_->calls); });
    return p.get_future().get();
  }

  std::string dir_;
  FakeWallClock clock_;
  asio::io_context io_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<templates::TemplateStore> templates_;
  std::unique_ptr<ops::testing::FakeNode> node_;
  std::unique_ptr<ops::Lifecycle> lc_;
  AccessTokens tokens_ = AccessTokens::withKey(std::string(32, 'k'));
  std::unique_ptr<RestApi> rest_;
  http::HttpServer server_{io_};
  std::thread thread_;
};

TEST_F(RestSecretsTest, CreateUpdateDeleteReachTheNode) {
  const std::string changed = "credential-changed t1 gh-token";
  auto created =
      call(http::verb::post, "/secrets", R"({"name":"gh-token","value":"first-value-0123456789"})");
  ASSERT_EQ(created.result_int(), 201) << created.body();
  EXPECT_EQ(json::parse(created.body()).at("name").as_string(), "gh-token");
  EXPECT_THAT(nodeCalls(), Contains(changed));

  // An update through E2B keeps the hosts and header Vessel's API gave it.
  store::CredentialRecord vessel_side;
  vessel_side.tenant_id = "t1";
  vessel_side.name = "gh-token";
  vessel_side.hosts = {"api.github.com"};
  vessel_side.header = "Authorization";
  vessel_side.value = "first-value-0123456789";
  ASSERT_TRUE(store_->putCredential(vessel_side).ok());
  size_t before = nodeCalls().size();
  auto updated =
      call(http::verb::post, "/secrets/gh-token", R"({"value":"second-value-0123456789"})");
  ASSERT_EQ(updated.result_int(), 200) << updated.body();
  auto calls = nodeCalls();
  ASSERT_GT(calls.size(), before);
  EXPECT_EQ(calls.back(), changed);
  auto stored = store_->getCredential("t1", "gh-token");
  ASSERT_TRUE(stored.ok() && *stored);
  EXPECT_EQ((*stored)->value, "second-value-0123456789");
  EXPECT_EQ((*stored)->header, "Authorization");
  EXPECT_EQ((*stored)->hosts, std::vector<std::string>{"api.github.com"});

  auto listed = call(http::verb::get, "/secrets");
  ASSERT_EQ(listed.result_int(), 200);
  EXPECT_EQ(json::parse(listed.body()).as_array().size(), 1u);

  before = nodeCalls().size();
  auto deleted = call(http::verb::delete_, "/secrets/gh-token");
  ASSERT_EQ(deleted.result_int(), 204) << deleted.body();
  calls = nodeCalls();
  ASSERT_GT(calls.size(), before);
  EXPECT_EQ(calls.back(), changed);
  EXPECT_FALSE(*store_->getCredential("t1", "gh-token"));

  // Refused calls tell the node nothing.
  before = nodeCalls().size();
  EXPECT_EQ(call(http::verb::delete_, "/secrets/gh-token").result_int(), 404);
  EXPECT_EQ(call(http::verb::post, "/secrets/nope", R"({"value":"x"})").result_int(), 404);
  EXPECT_EQ(nodeCalls().size(), before);
}

// The credentials made for network rules (header injection) are written and
// deleted through the lifecycle too: the node hears of every one.
TEST_F(RestSecretsTest, NetworkRuleCredentialsGoThroughTheLifecycle) {
  auto created = call(http::verb::post, "/sandboxes",
                      R"({"templateID":"base","timeout":300,"network":{"rules":{)"
                      R"("api.example.com":[{"transform":{"headers":{"X-Key":"one"}}}]}}})");
  ASSERT_EQ(created.result_int(), 201) << created.body();
  std::string id(json::parse(created.body()).at("sandboxID").as_string());
  auto first = ruleNames();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(changed(first[0]), 1u);
  auto c = store_->getCredential("t1", first[0]);
  ASSERT_TRUE(c.ok() && *c);
  EXPECT_EQ((*c)->header, "X-Key");
  EXPECT_EQ((*c)->value, "one");
  EXPECT_EQ((*c)->hosts, std::vector<std::string>{"api.example.com"});

  // New rules: a new credential made, the old one deleted, both through it.
  auto updated =
      call(http::verb::put, "/sandboxes/" + id + "/network",
           R"({"rules":{"api.example.com":[{"transform":{"headers":{"X-Key":"two"}}}]}})");
  ASSERT_EQ(updated.result_int(), 204) << updated.body();
  auto second = ruleNames();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0], first[0]);
  EXPECT_EQ(changed(first[0]), 2u) << "its deletion reached the node";
  EXPECT_EQ(changed(second[0]), 1u);

  // Kill: its rules' credentials go, through the lifecycle.
  auto killed = call(http::verb::delete_, "/sandboxes/" + id);
  ASSERT_EQ(killed.result_int(), 204) << killed.body();
  EXPECT_TRUE(ruleNames().empty());
  EXPECT_EQ(changed(second[0]), 2u);

  // A create the lifecycle refuses leaves no credential behind.
  auto refused = call(http::verb::post, "/sandboxes",
                      R"({"templateID":"nosuch","network":{"rules":{)"
                      R"("api.example.com":[{"transform":{"headers":{"X-Key":"x"}}}]}}})");
  EXPECT_EQ(refused.result_int(), 404) << refused.body();
  EXPECT_TRUE(ruleNames().empty());
}

// A fork's copies carry their parent's rules, and with them its rule
// credentials (issue 25 item 5): killing a copy leaves the credential the
// parent and the other copy still use; the last one killed takes it.
TEST_F(RestSecretsTest, ARuleCredentialGoesWithTheLastSandboxThatNamesIt) {
  auto created = call(http::verb::post, "/sandboxes",
                      R"({"templateID":"base","timeout":300,"network":{"rules":{)"
                      R"("api.example.com":[{"transform":{"headers":{"X-Key":"one"}}}]}}})");
  ASSERT_EQ(created.result_int(), 201) << created.body();
  std::string parent(json::parse(created.body()).at("sandboxID").as_string());
  auto forked = call(http::verb::post, "/sandboxes/" + parent + "/fork", R"({"count":2})");
  ASSERT_EQ(forked.result_int(), 201) << forked.body();
  std::vector<std::string> copies;
  json::value answer = json::parse(forked.body());
  ASSERT_TRUE(answer.is_array()) << forked.body();
  for (const auto& c : answer.as_array())
    if (c.as_object().contains("sandbox"))
      copies.emplace_back(c.at("sandbox").at("sandboxID").as_string());
  ASSERT_EQ(copies.size(), 2u);
  auto names = ruleNames();
  ASSERT_EQ(names.size(), 1u) << "the copies share the parent's credential";

  for (const auto& id : {copies[0], parent}) {
    auto killed = call(http::verb::delete_, "/sandboxes/" + id);
    ASSERT_EQ(killed.result_int(), 204) << killed.body();
    EXPECT_EQ(ruleNames(), names) << "still named by a live sandbox";
    auto c = store_->getCredential("t1", names[0]);
    ASSERT_TRUE(c.ok() && *c);
    EXPECT_EQ((*c)->value, "one");
  }
  auto last = call(http::verb::delete_, "/sandboxes/" + copies[1]);
  ASSERT_EQ(last.result_int(), 204) << last.body();
  EXPECT_TRUE(ruleNames().empty()) << "the last sandbox naming it took it";
}

// A header rule resolves only host-less E2B secrets or credentials bound to
// the rule's own host (issue 25 item 5): a credential the native API bound to
// api.github.com cannot be carried to another host by a rule naming it.
TEST_F(RestSecretsTest, HeaderRulesUseOnlySecretsMeantForTheirHost) {
  store::CredentialRecord bound;
  bound.tenant_id = "t1";
  bound.name = "gh-token";
  bound.hosts = {"api.github.com"};
  bound.header = "Authorization";
  bound.value = "Bearer ghp-0123456789abcdef";
  ASSERT_TRUE(store_->putCredential(bound).ok());
  auto rule = [](const char* host, const char* secret) {
    return std::string(R"({"templateID":"base","timeout":300,"network":{"rules":{")") + host +
           R"(":[{"transform":{"headers":{"X-Key":"${e2b.secrets.)" + secret + R"(}"}}}]}}})";
  };
  auto stolen = call(http::verb::post, "/sandboxes", rule("attacker.example.com", "gh-token"));
  EXPECT_EQ(stolen.result_int(), 400) << stolen.body();
  EXPECT_TRUE(ruleNames().empty()) << "no credential made for the other host";
  auto own = call(http::verb::post, "/sandboxes", rule("API.github.com", "gh-token"));
  EXPECT_EQ(own.result_int(), 201) << own.body();
  // An E2B secret (no hosts) goes wherever its owner's rule puts it.
  auto made =
      call(http::verb::post, "/secrets", R"({"name":"e2b-key","value":"e2b-value-0123456789"})");
  ASSERT_EQ(made.result_int(), 201) << made.body();
  auto placed = call(http::verb::post, "/sandboxes", rule("api.example.com", "e2b-key"));
  EXPECT_EQ(placed.result_int(), 201) << placed.body();
  // A rule's own copy is never a source, even for its host.
  auto names = ruleNames();
  ASSERT_FALSE(names.empty());
  auto copy = call(http::verb::post, "/sandboxes", rule("api.example.com", names[0].c_str()));
  EXPECT_EQ(copy.result_int(), 400) << copy.body();
}

}  // namespace
}  // namespace vessel::e2b
