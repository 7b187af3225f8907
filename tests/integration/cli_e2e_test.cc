// The `vessel` CLI end to end: the real binary against a real vesseld with
// real guests, checked by what it prints and how it exits, and by the API
// (through the client library) where the CLI's word is not enough. One
// daemon for the binary; guest boots are counted in each test's comment.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/client.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing::ScratchDir;
using testing::Vesseld;

Vesseld* d = nullptr;

using testing::CliRun;

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// `vessel ARGS...` against the daemon ("-": its dev key; "": its URL).
CliRun vessel(const std::vector<std::string>& args, const std::string& key = "-",
              const std::string& url = "") {
  return testing::runCli(VESSEL_PATH, *d, args, {key, url});
}

client::Client api(const std::string& key = "-") {
  client::ClientOptions o;
  o.url = d->url();
  o.token = key == "-" ? d->key() : key;
  return client::Client(o);
}

std::string stateOf(const std::string& id) {
  auto r = api().get("/v1/sandboxes/" + id);
  return r.ok() ? client::str(*r, "state") : "<" + r.error().message() + ">";
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    d = new Vesseld(VESSELD_PATH);
    ASSERT_TRUE(d->start()) << "vesseld did not come up; log:\n" << d->log();
  }
  static void TearDownTestSuite() {
    if (d) {
      auto e = d->stop();
      EXPECT_TRUE(e.exited && e.code == 0) << e.describe() << "\n" << d->log();
    }
    EXPECT_THAT(testing::qemuProcessesUsing(d->root()), IsEmpty());
    delete d;
    d = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(d && !d->key().empty()) << "vesseld did not start"; }
};

// Boots: create, resume, two fork copies.
TEST_F(CliTest, LifeOfASandbox) {
  CliRun c = vessel({"sandbox", "create", "--template", "minimal", "-e", "A=1", "-l", "owner=ci"});
  ASSERT_EQ(c.code, 0) << c.err << d->log();
  std::string id = c.last();
  ASSERT_THAT(id, ::testing::StartsWith("sb-"));
  EXPECT_EQ(c.lines().size(), 1u) << "not a terminal: only the id: " << c.out;
  EXPECT_EQ(stateOf(id), "running");

  CliRun ls = vessel({"sandbox", "list"});
  ASSERT_EQ(ls.code, 0) << ls.err;
  EXPECT_THAT(ls.out, HasSubstr(id));
  EXPECT_THAT(ls.lines().front(), HasSubstr("STATE"));
  CliRun q = vessel({"sandbox", "list", "-q"});
  EXPECT_THAT(q.lines(), ::testing::Contains(id));
  CliRun byowner = vessel({"sandbox", "list", "-q", "-l", "owner=ci"});
  EXPECT_THAT(byowner.lines(), ::testing::Contains(id)) << byowner.err;
  CliRun other = vessel({"sandbox", "list", "-q", "-l", "owner=someone else"});
  EXPECT_THAT(other.lines(), Not(::testing::Contains(id))) << other.err;

  CliRun get = vessel({"sandbox", "get", id});
  ASSERT_EQ(get.code, 0) << get.err;
  auto js = client::parseJson(get.out);
  ASSERT_TRUE(js.ok()) << get.out;
  EXPECT_EQ(client::str(*js, "state"), "running");
  EXPECT_EQ(client::str(*client::field(*js, "metadata"), "owner"), "ci");

  CliRun p = vessel({"sandbox", "pause", id});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(p.last(), id);
  EXPECT_EQ(stateOf(id), "paused");
  CliRun again = vessel({"sandbox", "pause", id});
  EXPECT_EQ(again.code, 1);
  EXPECT_THAT(again.err, HasSubstr("paused"));
  CliRun forked_paused = vessel({"sandbox", "fork", id});
  EXPECT_EQ(forked_paused.code, 1);
  EXPECT_THAT(forked_paused.err, HasSubstr("cannot fork a sandbox that is paused"));

  CliRun r = vessel({"sandbox", "resume", id});
  ASSERT_EQ(r.code, 0) << r.err << d->log();
  EXPECT_EQ(stateOf(id), "running");

  CliRun f = vessel({"sandbox", "fork", id, "--count", "2"});
  ASSERT_EQ(f.code, 0) << f.err << d->log();
  auto kids = f.lines();
  ASSERT_EQ(kids.size(), 2u) << f.out;
  for (const auto& k : kids) {
    EXPECT_THAT(k, ::testing::StartsWith("sb-"));
    EXPECT_NE(k, id);
    EXPECT_EQ(stateOf(k), "running");
    auto rec = api().get("/v1/sandboxes/" + k);
    ASSERT_TRUE(rec.ok());
    EXPECT_EQ(client::str(*client::field(*rec, "metadata"), "owner"), "ci");
  }
  EXPECT_EQ(stateOf(id), "running") << "the source runs on after a fork";

  CliRun rm = vessel({"sandbox", "delete", id, kids[0], kids[1]});
  ASSERT_EQ(rm.code, 0) << rm.err;
  EXPECT_EQ(rm.lines(), (std::vector<std::string>{id, kids[0], kids[1]}));
  CliRun after = vessel({"sandbox", "list", "-q"});
  EXPECT_THAT(after.lines(), Not(::testing::Contains(id)));
  CliRun gone = vessel({"sandbox", "get", id});
  EXPECT_EQ(gone.code, 1);
  EXPECT_THAT(gone.err, HasSubstr("does not exist"));
}

// Boots: none.
TEST_F(CliTest, ErrorsExitNonZeroWithAMessage) {
  CliRun unknown = vessel({"sandbox", "create", "--template", "nope"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_THAT(unknown.out, IsEmpty());
  EXPECT_THAT(unknown.err, HasSubstr("template 'nope' does not exist"));

  CliRun bad_key = vessel({"sandbox", "list"}, "vsk_not-a-key");
  EXPECT_EQ(bad_key.code, 1);
  EXPECT_THAT(bad_key.out, IsEmpty());
  EXPECT_THAT(bad_key.err, HasSubstr("invalid API key"));

  // Nothing listens on the port a just-closed acceptor had.
  uint16_t free_port = testing::freePort();
  std::string dead = "http://127.0.0.1:" + std::to_string(free_port);
  CliRun down = vessel({"sandbox", "list"}, "-", dead);
  EXPECT_EQ(down.code, 1);
  EXPECT_THAT(down.err, HasSubstr("cannot reach the Vessel API at " + dead));

  // https:// is a scheme the CLI speaks (--ca-file); another is refused.
  CliRun bad_url = vessel({"sandbox", "list"}, "-", "ftp://example.invalid");
  EXPECT_EQ(bad_url.code, 1);
  EXPECT_THAT(bad_url.err, HasSubstr("http:// or https://"));
  CliRun unresolved = vessel({"sandbox", "list"}, "-", "https://example.invalid");
  EXPECT_EQ(unresolved.code, 1);
  EXPECT_THAT(unresolved.err, HasSubstr("cannot reach the Vessel API at https://example.invalid"));

  CliRun missing_op = vessel({"ops", "watch", "op-000000000000"});
  EXPECT_EQ(missing_op.code, 1);
  EXPECT_THAT(missing_op.err, HasSubstr("does not exist"));

  CliRun shape = vessel({"sandbox", "create", "--vcpus", "7"});
  EXPECT_EQ(shape.code, 1);
  EXPECT_THAT(shape.err, HasSubstr("vCPUs"));

  CliRun usage = vessel({"sandbox", "fork"});
  EXPECT_NE(usage.code, 0);
}

// Boots: one template build, one create from it, one build that fails.
// Also the operator commands: a second tenant sees none of it.
TEST_F(CliTest, TemplateBuiltThroughTheApiCanBeUsedAndIsPrivate) {
  ScratchDir dir;
  std::string spec = dir.path() + "/spec.json";
  std::ofstream(spec) << R"({"name": "hello", "base": "minimal",
      "files": {"/etc/hello": "hi\n"}, "commands": ["echo built > /etc/built"]})";
  CliRun b = vessel({"template", "build", "-f", spec});
  ASSERT_EQ(b.code, 0) << b.err << d->log();
  EXPECT_THAT(b.last(), ::testing::StartsWith("hello@"));
  EXPECT_EQ(b.lines().size(), 1u) << b.out;

  CliRun tl = vessel({"template", "list"});
  ASSERT_EQ(tl.code, 0) << tl.err;
  EXPECT_THAT(tl.out, HasSubstr("hello"));
  EXPECT_THAT(tl.out, HasSubstr("minimal"));
  auto listed = api().get("/v1/templates");
  ASSERT_TRUE(listed.ok());
  bool found = false;
  for (const auto& t : client::field(*listed, "templates")->as_array())
    if (client::str(t, "name") == "hello") {
      found = true;
      EXPECT_EQ(b.last(), "hello@" + client::str(t, "version"));
      EXPECT_FALSE(client::field(t, "builtin")->as_bool());
    }
  EXPECT_TRUE(found) << listed->as_object();

  CliRun c = vessel({"sandbox", "create", "--template", "hello"});
  ASSERT_EQ(c.code, 0) << c.err << d->log();
  std::string id = c.last();
  EXPECT_EQ(stateOf(id), "running");
  auto rec = api().get("/v1/sandboxes/" + id);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(client::str(*rec, "template"), "hello");
  EXPECT_EQ(vessel({"sandbox", "delete", id}).code, 0);

  // A built-in name cannot be taken.
  std::string clash = dir.path() + "/clash.json";
  std::ofstream(clash) << R"({"name": "minimal"})";
  CliRun cl = vessel({"template", "build", "-f", clash});
  EXPECT_EQ(cl.code, 1);
  EXPECT_THAT(cl.err, HasSubstr("built in"));

  // A second tenant, made by the operator commands beside the running daemon.
  CliRun t = vessel({"tenant", "create", "acme", "--state-dir", d->stateDir()});
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_EQ(t.last(), "acme");
  CliRun dup = vessel({"tenant", "create", "acme", "--state-dir", d->stateDir()});
  EXPECT_EQ(dup.code, 1);
  EXPECT_THAT(dup.err, HasSubstr("already exists"));
  CliRun k = vessel({"key", "create", "acme", "--state-dir", d->stateDir()});
  ASSERT_EQ(k.code, 0) << k.err;
  std::string key2 = k.last();
  EXPECT_THAT(key2, ::testing::StartsWith("vsk_"));
  CliRun nokey = vessel({"key", "create", "nobody", "--state-dir", d->stateDir()});
  EXPECT_EQ(nokey.code, 1);
  EXPECT_THAT(nokey.err, HasSubstr("tenant 'nobody' does not exist"));

  CliRun tl2 = vessel({"template", "list"}, key2);
  ASSERT_EQ(tl2.code, 0) << tl2.err;
  EXPECT_THAT(tl2.out, HasSubstr("minimal"));
  EXPECT_THAT(tl2.out, Not(HasSubstr("hello")));
  CliRun c2 = vessel({"sandbox", "create", "--template", "hello"}, key2);
  EXPECT_EQ(c2.code, 1);
  EXPECT_THAT(c2.err, HasSubstr("template 'hello' does not exist"));
  CliRun ls2 = vessel({"sandbox", "list", "-q"}, key2);
  EXPECT_EQ(ls2.code, 0);
  EXPECT_THAT(ls2.out, IsEmpty());
}

// Boots: one (the failing build's base).
TEST_F(CliTest, OpsWatchOnAFailingOperationExitsNonZero) {
  ScratchDir dir;
  std::string spec = dir.path() + "/broken.json";
  std::ofstream(spec) << R"({"name": "broken", "commands": ["echo nope >&2; exit 3"]})";
  CliRun b = vessel({"template", "build", "--async", "-f", spec});
  ASSERT_EQ(b.code, 0) << b.err;
  std::string op = b.last();
  ASSERT_THAT(op, ::testing::StartsWith("op-"));
  CliRun w = vessel({"ops", "watch", op});
  EXPECT_EQ(w.code, 1) << w.out;
  // Not a terminal: one line per event, the last one the failure.
  auto lines = w.lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.front(), ::testing::StartsWith("operation.pending"));
  EXPECT_THAT(w.out, HasSubstr("template.progress"));
  EXPECT_THAT(lines.back(), ::testing::StartsWith("operation.failed"));
  EXPECT_THAT(w.err, HasSubstr("failed"));
  EXPECT_THAT(w.err, HasSubstr("exit 3"));
  EXPECT_THAT(w.err, Not(HasSubstr("t-"))) << "the tenant's name, not the stored one";
  // Watching a finished operation again replays it and judges it the same.
  EXPECT_EQ(vessel({"ops", "watch", op}).code, 1);
  // And a successful one exits 0.
  CliRun c = vessel({"sandbox", "create", "--async"});
  ASSERT_EQ(c.code, 0) << c.err;
  auto parts = c.last();
  auto sp = parts.find(' ');
  ASSERT_NE(sp, std::string::npos) << parts;
  std::string id = parts.substr(0, sp), cop = parts.substr(sp + 1);
  CliRun ok = vessel({"ops", "watch", cop});
  EXPECT_EQ(ok.code, 0) << ok.err << d->log();
  EXPECT_THAT(ok.lines().back(), ::testing::StartsWith("operation.done"));
  EXPECT_EQ(vessel({"sandbox", "delete", id}).code, 0);
}

// Boots: one. Egress flags and lifetimes as the API stores them; what the
// gateway then does with a policy is egress_api_test's business.
TEST_F(CliTest, NetworkCredentialAndLifetimeFlags) {
  CliRun bad = vessel({"sandbox", "create", "--network", "allow:"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, HasSubstr("at least one name"));
  CliRun bogus = vessel({"sandbox", "create", "--network", "some"});
  EXPECT_EQ(bogus.code, 1);
  EXPECT_THAT(bogus.err, HasSubstr("expected none, full or allow:"));
  CliRun nocred = vessel({"sandbox", "create", "--credential", "nope"});
  EXPECT_EQ(nocred.code, 1);
  EXPECT_THAT(nocred.err, HasSubstr("nope"));

  const std::string secret = "Bearer cli-secret-7f3a-0123456789";
  CliRun cc = vessel({"credential", "create", "gh", "--host", "api.gh.test", "--header",
                      "Authorization: " + secret});
  ASSERT_EQ(cc.code, 0) << cc.err;
  EXPECT_EQ(cc.last(), "gh");
  CliRun cl = vessel({"credential", "list"});
  ASSERT_EQ(cl.code, 0) << cl.err;
  EXPECT_THAT(cl.out, HasSubstr("gh"));
  EXPECT_THAT(cl.out, HasSubstr("api.gh.test"));
  EXPECT_THAT(cl.out, Not(HasSubstr("cli-secret")));

  CliRun c = vessel({"sandbox", "create", "--network", "allow:a.test,*.b.test:8443", "--credential",
                     "gh", "--timeout", "600", "--lifetime", "3600"});
  ASSERT_EQ(c.code, 0) << c.err << d->log();
  std::string id = c.last();
  auto net = api().get("/v1/sandboxes/" + id + "/network");
  ASSERT_TRUE(net.ok()) << net.error().message();
  EXPECT_EQ(client::str(*net, "mode"), "allowlist");
  EXPECT_EQ(boost::json::serialize(*client::field(*net, "allow")), R"(["a.test","*.b.test:8443"])");
  EXPECT_EQ(boost::json::serialize(*client::field(*net, "credentials")), R"(["gh"])");
  auto rec = api().get("/v1/sandboxes/" + id);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(client::num(*rec, "timeout"), 600);

  CliRun show = vessel({"sandbox", "network", id});
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("allowlist"));
  EXPECT_THAT(show.out, HasSubstr("*.b.test:8443"));
  // A new mode keeps the credentials unless told otherwise.
  CliRun full = vessel({"sandbox", "network", id, "full"});
  ASSERT_EQ(full.code, 0) << full.err;
  net = api().get("/v1/sandboxes/" + id + "/network");
  ASSERT_TRUE(net.ok());
  EXPECT_EQ(client::str(*net, "mode"), "full");
  EXPECT_EQ(boost::json::serialize(*client::field(*net, "credentials")), R"(["gh"])");
  CliRun clear = vessel({"sandbox", "network", id, "--clear-credentials"});
  ASSERT_EQ(clear.code, 0) << clear.err;
  EXPECT_THAT(clear.out, HasSubstr("credentials: -"));
  net = api().get("/v1/sandboxes/" + id + "/network");
  ASSERT_TRUE(net.ok());
  EXPECT_EQ(client::str(*net, "mode"), "full") << "only the credentials changed";
  CliRun none = vessel({"sandbox", "network", id, "none"});
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_THAT(none.out, HasSubstr("mode:        none"));

  CliRun ext = vessel({"sandbox", "extend", id, "--timeout", "0"});
  ASSERT_EQ(ext.code, 0) << ext.err;
  rec = api().get("/v1/sandboxes/" + id);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(client::num(*rec, "timeout"), 0);
  EXPECT_EQ(vessel({"sandbox", "extend", id}).code, 1);

  EXPECT_EQ(vessel({"credential", "delete", "gh"}).code, 0);
  CliRun gone = vessel({"credential", "delete", "gh"});
  EXPECT_EQ(gone.code, 1);
  EXPECT_EQ(vessel({"sandbox", "delete", id}).code, 0);
}

// The warm pool vesseld keeps by default (--warm-pool minimal=2, sized
// from demand above that): a create takes one of its VMs, and the pool is
// filled again to its target.
TEST_F(CliTest, CreatesTakeAWarmPoolVmAndThePoolRefills) {
  auto metric = [](const std::string& name) {
    auto m = d->call("GET", "/metrics", "", "");
    std::string key = name + "{template=\"minimal\"} ";
    auto at = m.body.find(key);
    return at == std::string::npos ? -1 : std::atoi(m.body.c_str() + at + key.size());
  };
  auto pooled = [&] { return metric("vessel_warm_pool_vms"); };
  auto target = [&] { return metric("vessel_warm_pool_target_vms"); };
  // Earlier tests' creates may have grown it past 2.
  auto waitFull = [&] {
    for (int i = 0; i < 600 && pooled() != target(); ++i) std::this_thread::sleep_for(100ms);
    return pooled();
  };
  int full = waitFull();
  ASSERT_EQ(full, target()) << d->log();
  ASSERT_GE(full, 2);
  std::vector<int> before = d->qemuPids();
  CliRun c = vessel({"sandbox", "create"});
  ASSERT_EQ(c.code, 0) << c.err << d->log();
  std::string id = c.last();
  auto rec =
      boost::json::parse(slurp(d->stateDir() + "/runtime/sandboxes/" + id + "/sandbox.json"));
  int pid = static_cast<int>(rec.at("vm_pid").to_number<int64_t>());
  EXPECT_THAT(before, ::testing::Contains(pid)) << "the sandbox runs in a VM that was pooled";
  EXPECT_EQ(waitFull(), full) << "refilled; " << d->log();
  EXPECT_EQ(d->qemuPids().size(), before.size() + 1);
  EXPECT_EQ(vessel({"sandbox", "delete", id}).code, 0);
}

// Boots: two creates and a fork into a template.
TEST_F(CliTest, ForkIntoATemplateAndCreateFromIt) {
  CliRun c = vessel({"sandbox", "create"});
  ASSERT_EQ(c.code, 0) << c.err << d->log();
  std::string id = c.last();
  CliRun w = vessel({"exec", id, "--", "sh", "-c", "echo forked-state > /home/user/f"});
  ASSERT_EQ(w.code, 0) << w.err;
  CliRun both = vessel({"sandbox", "fork", id, "--template", "snap", "--count", "2"});
  EXPECT_NE(both.code, 0) << "--template excludes --count";
  CliRun builtin = vessel({"sandbox", "fork", id, "--template", "minimal"});
  EXPECT_EQ(builtin.code, 1);
  EXPECT_THAT(builtin.err, HasSubstr("built in"));
  CliRun f = vessel({"sandbox", "fork", id, "--template", "snap"});
  ASSERT_EQ(f.code, 0) << f.err << d->log();
  EXPECT_THAT(f.last(), ::testing::StartsWith("snap@"));
  EXPECT_EQ(stateOf(id), "running") << "the source runs on";

  CliRun c2 = vessel({"sandbox", "create", "--template", "snap"});
  ASSERT_EQ(c2.code, 0) << c2.err << d->log();
  std::string id2 = c2.last();
  CliRun r = vessel({"exec", id2, "--", "cat", "/home/user/f"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "forked-state\n");
  CliRun h = vessel({"exec", id2, "--", "hostname"});
  EXPECT_EQ(h.out, id2 + "\n") << "a create from it has an identity of its own";

  // A second fork makes a newer version; the first stays while id2 uses it
  // and is collected once id2 is gone.
  auto versions = [] {
    std::vector<std::string> v;
    std::error_code ec;
    for (auto& n : std::filesystem::directory_iterator(d->cacheDir() + "/templates", ec)) {
      std::string name = n.path().filename().string();
      if (name.size() > 5 && name.substr(name.size() - 5) == "-snap")
        for (auto& ver : std::filesystem::directory_iterator(n.path(), ec))
          v.push_back(ver.path().filename().string());
    }
    return v;
  };
  ASSERT_EQ(versions().size(), 1u);
  std::string v1 = versions()[0];
  CliRun f2 = vessel({"sandbox", "fork", id, "--template", "snap"});
  ASSERT_EQ(f2.code, 0) << f2.err << d->log();
  EXPECT_NE(f2.last(), "snap@" + v1);
  EXPECT_EQ(versions().size(), 2u) << "v1 is in use by " << id2;
  EXPECT_EQ(vessel({"sandbox", "delete", id2}).code, 0);
  EXPECT_THAT(versions(), ::testing::ElementsAre(f2.last().substr(5))) << "v1 collected";
  EXPECT_EQ(vessel({"sandbox", "delete", id}).code, 0);
}

// Boots: one, cold (no snapshot).
TEST_F(CliTest, ColdCreateBootsTheTemplateDisk) {
  CliRun c = vessel({"sandbox", "create", "--cold"});
  ASSERT_EQ(c.code, 0) << c.err << d->log();
  std::string id = c.last();
  EXPECT_EQ(stateOf(id), "running");
  EXPECT_EQ(vessel({"sandbox", "delete", id}).code, 0);
}

}  // namespace
}  // namespace vessel
