// Supervision and the lifecycle's fixes against a real vesseld with real
// guests: a VM killed with SIGKILL fails its sandbox with the reason and
// releases everything; delete is accepted while a resume is in flight and
// never restores a paused sandbox (even one whose saved memory is gone);
// fork copies keep their parent's expiry.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <thread>

#include "base/fd.h"
#include "guest_env.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::str;

testing::Vesseld* d = nullptr;

class SupervisionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    d = new testing::Vesseld(VESSELD_PATH, {"--no-egress", "--warm-pool=none"});
    d->setContract(testing::apiContract());
    ASSERT_TRUE(d->start()) << d->log();
  }
  static void TearDownTestSuite() { testing::endSuite(d); }
  void SetUp() override { ASSERT_TRUE(d && d->running()) << "vesseld is not running"; }

  // A running sandbox.
  std::string running(const std::string& body = "{}") {
    auto r = d->call("POST", "/v1/sandboxes", body);
    EXPECT_EQ(r.status, 202) << r.body;
    if (r.status != 202) return "";
    std::string id = str(r.js().at("sandbox"), "id");
    EXPECT_EQ(d->finish(str(r.js().at("operation"), "id")), "done") << d->log();
    return id;
  }
  // POSTs an action; its operation id ("" if refused).
  std::string start(const std::string& id, const std::string& verb, int want = 202) {
    auto r = d->call("POST", "/v1/sandboxes/" + id + ":" + verb);
    EXPECT_EQ(r.status, want) << verb << " " << id << ": " << r.body;
    return r.status == 202 ? str(r.js().at("operation"), "id") : "";
  }
  std::string remove(const std::string& id) {
    auto r = d->call("DELETE", "/v1/sandboxes/" + id);
    EXPECT_EQ(r.status, 202) << r.body;
    return r.status == 202 ? str(r.js().at("operation"), "id") : "";
  }
  std::string sandboxDir(const std::string& id) {
    return d->stateDir() + "/runtime/sandboxes/" + id;
  }
  json::value record(const std::string& id) {
    auto text = readFile(sandboxDir(id) + "/sandbox.json");
    if (!text.ok()) return {};
    boost::system::error_code ec;
    return json::parse(*text, ec);
  }
};

TEST_F(SupervisionTest, AVmKilledWithSigkillFailsItsSandboxAndReleasesIt) {
  std::string id = running();
  ASSERT_FALSE(id.empty());
  json::value rec = record(id);
  ASSERT_TRUE(rec.is_object());
  int pid = static_cast<int>(rec.at("vm_pid").to_number<int64_t>());
  std::string vm_dir(rec.at("vm_dir").as_string());
  ASSERT_GT(pid, 0);
  std::string token = d->session(id);
  ASSERT_FALSE(token.empty());
  // The global event stream says so as soon as it happens (no polling).
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  auto ev = d->call("GET", "/v1/events", "", "-", {}, [&](const std::string& b) {
    for (auto& e : testing::parseSse(b))
      if (e.type == "sandbox.state" && str(e.data, "id") == id && str(e.data, "state") == "failed")
        return true;
    return false;
  });
  bool seen = false;
  for (auto& e : testing::parseSse(ev.body))
    if (e.type == "sandbox.state" && str(e.data, "id") == id && str(e.data, "state") == "failed") {
      seen = true;
      EXPECT_THAT(str(e.data, "error"), HasSubstr("exited unexpectedly")) << ev.body;
      EXPECT_THAT(str(e.data, "error"), HasSubstr("signal 9")) << ev.body;
    }
  ASSERT_TRUE(seen) << ev.body << d->log();
  auto sb = d->call("GET", "/v1/sandboxes/" + id).js();
  EXPECT_EQ(str(sb, "state"), "failed");
  // Its VM, files and sessions are released.
  EXPECT_FALSE(fs::exists(vm_dir)) << vm_dir;
  EXPECT_FALSE(fs::exists(sandboxDir(id)));
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(d->data(token, "GET", "/v1/files/stat?path=/").status, 401);
  // And it can be deleted like any failed sandbox.
  EXPECT_EQ(d->finish(remove(id)), "done") << d->log();
}

TEST_F(SupervisionTest, DeletingAPausedSandboxNeverRestoresIt) {
  std::string id = running();
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(d->finish(start(id, "pause")), "done") << d->log();
  // Its saved memory and device state are gone (a full disk, an operator's
  // mistake): a delete that restored first would fail.
  ASSERT_TRUE(fs::remove(sandboxDir(id) + "/pause.state"));
  EXPECT_EQ(d->finish(remove(id)), "done") << d->log();
  EXPECT_EQ(d->call("GET", "/v1/sandboxes/" + id).status, 404);
  EXPECT_FALSE(fs::exists(sandboxDir(id)));
  EXPECT_THAT(d->log(), ::testing::Not(HasSubstr("resume sandbox " + id)));
}

TEST_F(SupervisionTest, DeleteIsAcceptedWhileAResumeIsInFlight) {
  std::string id = running();
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(d->finish(start(id, "pause")), "done") << d->log();
  std::string resume = start(id, "resume");
  ASSERT_FALSE(resume.empty());
  // At once, while the restore runs: accepted, not 409.
  std::string del = remove(id);
  ASSERT_FALSE(del.empty());
  EXPECT_EQ(d->finish(del), "done") << d->log();
  EXPECT_THAT(d->finish(resume), ::testing::AnyOf("done", "failed"));
  EXPECT_EQ(d->call("GET", "/v1/sandboxes/" + id).status, 404);
  EXPECT_FALSE(fs::exists(sandboxDir(id)));
  for (int pid : d->qemuPids()) {
    std::string cmd;
    if (auto c = readFile("/proc/" + std::to_string(pid) + "/cmdline"); c.ok()) cmd = *c;
    EXPECT_THAT(cmd, ::testing::Not(HasSubstr(id))) << "a VM of the deleted sandbox runs on";
  }
}

TEST_F(SupervisionTest, ForkCopiesKeepTheFirstParentsExpiry) {
  std::string id = running(R"({"lifetime": 600})");
  ASSERT_FALSE(id.empty());
  std::string expires = str(d->call("GET", "/v1/sandboxes/" + id).js(), "expires_at");
  auto f = d->call("POST", "/v1/sandboxes/" + id + ":fork");
  ASSERT_EQ(f.status, 202) << f.body;
  std::string child = str(f.js().at("sandboxes").as_array().at(0), "id");
  EXPECT_EQ(str(f.js().at("sandboxes").as_array().at(0), "expires_at"), expires);
  ASSERT_EQ(d->finish(str(f.js().at("operation"), "id")), "done") << d->log();
  auto g = d->call("POST", "/v1/sandboxes/" + child + ":fork");
  ASSERT_EQ(g.status, 202) << g.body;
  std::string grandchild = str(g.js().at("sandboxes").as_array().at(0), "id");
  ASSERT_EQ(d->finish(str(g.js().at("operation"), "id")), "done") << d->log();
  EXPECT_EQ(str(d->call("GET", "/v1/sandboxes/" + grandchild).js(), "expires_at"), expires);
  for (const auto& s : {grandchild, child, id}) EXPECT_EQ(d->finish(remove(s)), "done");
}

}  // namespace
}  // namespace vessel
