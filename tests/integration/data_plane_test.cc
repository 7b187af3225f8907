// Sessions and the data plane end to end: a real vesseld serving both
// listeners, real HTTP, real guests. Each test case is its own process
// (ctest runs them one by one) with its own daemon, so there are few of
// them and each boots at most two sandboxes.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <thread>

#include "base/child_process.h"
#include "base/fd.h"
#include "base/sha256.h"
#include "guest_env.h"
#include "http_client.h"
#include "store/store.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using testing::call;
using ::testing::HasSubstr;
using testing::HttpStream;
using testing::parseSse;
using testing::Reply;
using testing::Request;
using testing::ScratchDir;
using testing::SseEvent;
using testing::str;

class DataPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    d_ = std::make_unique<testing::Vesseld>(VESSELD_PATH);
    d_->setContract(testing::apiContract());  // every reply against api/openapi.yaml
    ASSERT_TRUE(d_->start()) << "vesseld did not come up; log:\n" << d_->log();
    ASSERT_THAT(d_->key(), ::testing::StartsWith("vsk_"));
    auto db = store::openSqlite(d_->stateDir() + "/vessel.db");
    ASSERT_TRUE(db.ok()) << db.error().message();
    ASSERT_TRUE((*db)->createTenant("t2", "second").ok());
    ASSERT_TRUE((*db)->addApiKey("t2", sha256Hex(key2_)).ok());
  }
  void TearDown() override {
    if (d_->running()) {
      auto e = d_->stop();
      EXPECT_TRUE(e.exited && e.code == 0) << e.describe() << "\n" << d_->log();
    }
    EXPECT_THAT(testing::qemuProcessesUsing(d_->root()), ::testing::IsEmpty());
  }
  std::string readLog() { return d_->log(); }

  Reply api(const std::string& method, const std::string& target, const std::string& body = "",
            const std::string& key = "-") {
    return d_->call(method, target, body, key);
  }
  Reply data(const std::string& token, const std::string& method, const std::string& target,
             const std::string& body = "", bool json = true) {
    return d_->data(token, method, target, body, json);
  }
  // Creates a running sandbox, following its operation's events to the end.
  std::string createSandbox() {
    std::string why;
    std::string id = d_->createSandbox("{}", &why);
    EXPECT_FALSE(id.empty()) << why << "\n" << readLog();
    return id;
  }
  std::string session(const std::string& id, const std::string& body = "") {
    Reply r = api("POST", "/v1/sandboxes/" + id + "/sessions", body);
    EXPECT_EQ(r.status, 201) << r.body;
    auto v = r.js();
    EXPECT_EQ(str(v, "data_url"), "http://127.0.0.1:" + std::to_string(d_->dataPort()));
    EXPECT_NE(str(v, "expires_at"), "<missing>");
    EXPECT_THAT(str(v, "token"), ::testing::StartsWith("vst_"));
    return str(v, "token");
  }
  void deleteSandbox(const std::string& id) { EXPECT_TRUE(d_->deleteSandbox(id)) << id; }

  // Opens an exec stream and reads up to its `start` event; returns the stream and pid.
  std::pair<std::unique_ptr<HttpStream>, uint32_t> startExec(const std::string& token,
                                                             const std::string& body) {
    Request r;
    r.method = "POST";
    r.target = "/v1/exec";
    r.body = body;
    r.bearer = token;
    auto s = HttpStream::open(d_->dataPort(), r);
    if (!s) return {};
    bool ok = s->readUntil([](const std::string& b) { return !parseSse(b).empty(); });
    EXPECT_TRUE(ok) << s->reply().status << " " << s->reply().body;
    if (!ok) return {nullptr, 0};
    EXPECT_EQ(s->reply().status, 200);
    EXPECT_THAT(s->reply().header("Content-Type"), HasSubstr("text/event-stream"));
    auto ev = parseSse(s->reply().body);
    EXPECT_EQ(ev[0].type, "start");
    uint32_t pid = ev[0].data.is_object()
                       ? static_cast<uint32_t>(ev[0].data.at("pid").to_number<int64_t>())
                       : 0;
    return {std::move(s), pid};
  }

  using ExecOutput = testing::Vesseld::ExecOutput;
  static ExecOutput collect(const std::string& body) { return testing::collectExec(body); }
  ExecOutput run(const std::string& token, const std::string& body) {
    Reply r = data(token, "POST", "/v1/exec", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return collect(r.body);
  }

  std::unique_ptr<testing::Vesseld> d_;
  const std::string key2_ = "vsk_data-plane-second-tenant";
};

// Output up to `needle` seen on the stream (stdout events decoded).
bool waitForOutput(HttpStream& s, const std::string& needle) {
  return s.readUntil([&](const std::string& b) {
    std::string out;
    for (const auto& e : parseSse(b))
      if (e.type == "stdout") out += testing::unbase64(str(e.data, "data"));
    return out.find(needle) != std::string::npos;
  });
}

bool waitForExit(HttpStream& s) {
  return s.readUntil([](const std::string& b) {
    auto ev = parseSse(b);
    return !ev.empty() && ev.back().type == "exit";
  });
}

TEST_F(DataPlaneTest, ExecStdinSignalsPtyFilesAndWatch) {
  std::string id = createSandbox();
  ASSERT_FALSE(id.empty());
  std::string tok = session(id);

  // Output, exit code, the order of events, and the default user.
  auto r = run(tok, R"({"shell":"echo out; echo err >&2; id -un; exit 3"})");
  EXPECT_EQ(r.out, "out\nuser\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.exit_code, 3);
  ASSERT_FALSE(r.types.empty());
  EXPECT_EQ(r.types.front(), "start");
  EXPECT_EQ(r.types.back(), "exit");
  auto root = run(tok, R"({"cmd":["id","-u"],"user":"root","env":{"X":"y"},"cwd":"/tmp"})");
  EXPECT_EQ(root.out, "0\n");
  EXPECT_EQ(root.exit_code, 0);
  EXPECT_EQ(run(tok, R"({"shell":"echo $X $PWD","env":{"X":"y"},"cwd":"/tmp"})").out, "y /tmp\n");
  // Without stdin: true the process reads EOF at once.
  EXPECT_EQ(run(tok, R"({"cmd":["cat"]})").exit_code, 0);

  // stdin by process id: write, then close.
  {
    auto [s, pid] = startExec(tok, R"({"cmd":["cat"],"stdin":true})");
    ASSERT_TRUE(s);
    std::string p = "/v1/processes/" + std::to_string(pid);
    EXPECT_EQ(data(tok, "POST", p + "/stdin", "hello\n", false).status, 204);
    EXPECT_TRUE(waitForOutput(*s, "hello\n"));
    EXPECT_EQ(data(tok, "POST", p + "/stdin", "again\n", false).status, 204);
    EXPECT_EQ(data(tok, "POST", p + "/close-stdin").status, 204);
    ASSERT_TRUE(waitForExit(*s));
    auto o = collect(s->reply().body);
    EXPECT_EQ(o.out, "hello\nagain\n");
    EXPECT_EQ(o.exit_code, 0);
    EXPECT_EQ(data(tok, "POST", p + "/stdin", "late", false).status, 404);
  }
  // A signal by process id.
  {
    auto [s, pid] = startExec(tok, R"({"cmd":["sleep","300"]})");
    ASSERT_TRUE(s);
    Reply sig = data(tok, "POST", "/v1/processes/" + std::to_string(pid) + "/signal",
                     R"({"signal":"TERM"})");
    EXPECT_EQ(sig.status, 204) << sig.body;
    ASSERT_TRUE(waitForExit(*s));
    auto o = collect(s->reply().body);
    EXPECT_EQ(o.signal, 15);
    EXPECT_EQ(o.exit_code, 128 + 15);
  }
  // A pty, resized while it runs.
  {
    auto [s, pid] =
        startExec(tok, R"({"shell":"stty size; read x; stty size","pty":{"rows":30,"cols":100}})");
    ASSERT_TRUE(s);
    EXPECT_TRUE(waitForOutput(*s, "30 100"));
    std::string p = "/v1/processes/" + std::to_string(pid);
    Reply rs = data(tok, "POST", p + "/resize", R"({"rows":40,"cols":120})");
    EXPECT_EQ(rs.status, 204) << rs.body;
    EXPECT_EQ(data(tok, "POST", p + "/stdin", "\n", false).status, 204);
    EXPECT_TRUE(waitForOutput(*s, "40 120"));
    ASSERT_TRUE(waitForExit(*s));
    EXPECT_EQ(collect(s->reply().body).exit_code, 0);
  }
  // A client that goes away takes its command with it.
  {
    auto [s, pid] = startExec(tok, R"({"cmd":["sleep","301"]})");
    ASSERT_TRUE(s);
    s->close();
    bool gone = false;
    for (int i = 0; i < 300 && !gone; ++i) {
      gone = run(tok, R"({"shell":"ps | grep -v grep | grep -c 'sleep 301'"})").out == "0\n";
      if (!gone) std::this_thread::sleep_for(100ms);
    }
    EXPECT_TRUE(gone);
  }

  // Files: a 3 MiB upload streamed in, downloaded back, equal by SHA-256.
  std::string blob(3 << 20, '\0');
  std::mt19937_64 rng(42);
  for (auto& c : blob) c = static_cast<char>(rng());
  Reply up = data(tok, "PUT", "/v1/files?path=/home/user/blob.bin&mode=0600", blob, false);
  ASSERT_EQ(up.status, 201) << up.body;
  EXPECT_EQ(up.js().at("size").to_number<int64_t>(), int64_t{3 << 20});
  EXPECT_EQ(up.js().at("uid").to_number<int64_t>(), 1000) << "owned like its directory";
  EXPECT_EQ(up.js().at("mode").to_number<int64_t>(), 0600);
  Reply down = data(tok, "GET", "/v1/files?path=/home/user/blob.bin");
  ASSERT_EQ(down.status, 200);
  auto payload = testing::dechunk(down.body);
  ASSERT_TRUE(payload.has_value()) << "incomplete chunked body";
  EXPECT_EQ(sha256Hex(*payload), sha256Hex(blob));
  EXPECT_EQ(run(tok, R"({"shell":"sha256sum /home/user/blob.bin"})").out.substr(0, 64),
            sha256Hex(blob));
  // An empty file.
  EXPECT_EQ(data(tok, "PUT", "/v1/files?path=/tmp/empty", "", false).status, 201);
  EXPECT_EQ(testing::dechunk(data(tok, "GET", "/v1/files?path=/tmp/empty").body).value_or("x"), "");

  // mkdir, list, stat, move, remove.
  EXPECT_EQ(data(tok, "POST", "/v1/files/mkdir", R"({"path":"/tmp/d/e"})").status, 204);
  EXPECT_EQ(data(tok, "PUT", "/v1/files?path=/tmp/d/e/f.txt", "abc", false).status, 201);
  Reply ls = data(tok, "GET", "/v1/files/list?path=/tmp/d&depth=2");
  ASSERT_EQ(ls.status, 200) << ls.body;
  std::vector<std::string> names;
  json::value listing = ls.js();
  for (auto& e : listing.at("entries").as_array()) names.push_back(str(e, "path"));
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("/tmp/d/e", "/tmp/d/e/f.txt"));
  Reply st = data(tok, "GET", "/v1/files/stat?path=/tmp/d/e/f.txt");
  ASSERT_EQ(st.status, 200);
  EXPECT_EQ(str(st.js(), "type"), "file");
  EXPECT_EQ(st.js().at("size").to_number<int64_t>(), 3);
  EXPECT_EQ(str(data(tok, "GET", "/v1/files/stat?path=/tmp/d").js(), "type"), "dir");
  EXPECT_EQ(data(tok, "POST", "/v1/files/move", R"({"from":"/tmp/d/e/f.txt","to":"/tmp/d/g.txt"})")
                .status,
            204);
  EXPECT_EQ(data(tok, "GET", "/v1/files/stat?path=/tmp/d/e/f.txt").status, 404);
  EXPECT_EQ(testing::dechunk(data(tok, "GET", "/v1/files?path=/tmp/d/g.txt").body).value_or(""),
            "abc");
  EXPECT_EQ(data(tok, "DELETE", "/v1/files?path=/tmp/d").status, 409) << "not empty, not recursive";
  EXPECT_EQ(data(tok, "DELETE", "/v1/files?path=/tmp/d&recursive=true").status, 204);
  EXPECT_EQ(data(tok, "GET", "/v1/files/stat?path=/tmp/d").status, 404);

  // A directory watch sees a file appear, change and go.
  ASSERT_EQ(data(tok, "POST", "/v1/files/mkdir", R"({"path":"/tmp/w"})").status, 204);
  {
    Request w;
    w.target = "/v1/files/watch?path=/tmp/w";
    w.bearer = tok;
    auto s = HttpStream::open(d_->dataPort(), w);
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->readUntil([](const std::string& b) { return !parseSse(b).empty(); }))
        << s->reply().body;
    EXPECT_EQ(parseSse(s->reply().body)[0].type, "ready");
    EXPECT_EQ(data(tok, "PUT", "/v1/files?path=/tmp/w/new.txt", "x", false).status, 201);
    EXPECT_EQ(data(tok, "DELETE", "/v1/files?path=/tmp/w/new.txt").status, 204);
    bool seen = s->readUntil([](const std::string& b) {
      for (const auto& e : parseSse(b))
        if (e.type == "delete" && str(e.data, "name") == "new.txt") return true;
      return false;
    });
    EXPECT_TRUE(seen) << s->reply().body;
    std::vector<std::string> kinds;
    for (const auto& e : parseSse(s->reply().body))
      if (str(e.data, "name") == "new.txt") kinds.push_back(e.type);
    EXPECT_THAT(kinds, ::testing::Contains("moved_to")) << "uploads appear atomically by rename";
  }

  // Bad input: each a JSON error with the right status.
  struct Case {
    std::string method, target, body;
    int status;
    std::string code;
  };
  std::vector<Case> cases = {
      {"POST", "/v1/exec", "{nope", 400, "invalid_argument"},
      {"POST", "/v1/exec", R"({"cmd":["/nonexistent"]})", 404, "not_found"},
      {"GET", "/v1/exec", "", 405, "invalid_argument"},
      {"GET", "/v1/files?path=relative", "", 400, "invalid_argument"},
      {"GET", "/v1/files?path=/nonexistent", "", 404, "not_found"},
      {"GET", "/v1/files?colour=red", "", 400, "invalid_argument"},
      {"GET", "/v1/files/stat?path=/nonexistent", "", 404, "not_found"},
      {"PUT", "/v1/files?path=/nonexistent/dir/f", "x", 404, "not_found"},
      {"POST", "/v1/processes/abc/signal", R"({"signal":"TERM"})", 400, "invalid_argument"},
      {"POST", "/v1/processes/999999/stdin", "x", 404, "not_found"},
      {"POST", "/v1/processes/1/signal", R"({"signal":"BOGUS"})", 400, "invalid_argument"},
      {"GET", "/v1/nothing", "", 404, "not_found"},
  };
  for (const auto& c : cases) {
    Reply b = data(tok, c.method, c.target, c.body);
    EXPECT_EQ(b.status, c.status) << c.method << " " << c.target << ": " << b.body;
    EXPECT_EQ(str(b.js(), "code"), c.code) << c.method << " " << c.target;
  }
  Reply big = data(tok, "POST", "/v1/processes/1/stdin", std::string((1 << 20) + 10, 'x'), false);
  EXPECT_EQ(big.status, 413);
  // The data plane's requests are counted apart from the control plane's.
  std::string m = api("GET", "/metrics", "", "").body;
  EXPECT_THAT(
      m, HasSubstr("vessel_http_requests_total{plane=\"data\",method=\"GET\",status=\"200\"}"));
  EXPECT_THAT(m, HasSubstr("vessel_api_errors_total{plane=\"data\",code=\"not_found\"}"));
  EXPECT_THAT(m, HasSubstr("vessel_http_requests_total{plane=\"control\",method=\"POST\""));
  deleteSandbox(id);
}

TEST_F(DataPlaneTest, TokensReachOnlyTheirSandboxAndDieWithIt) {
  std::string a = createSandbox();
  std::string b = createSandbox();
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  std::string ta = session(a), tb = session(b);
  ASSERT_NE(ta, tb);

  // Each token reaches its own sandbox and nothing else.
  EXPECT_EQ(run(ta, R"({"cmd":["hostname"]})").out, a + "\n");
  EXPECT_EQ(run(tb, R"({"cmd":["hostname"]})").out, b + "\n");
  ASSERT_EQ(data(ta, "PUT", "/v1/files?path=/tmp/only-a", "secret", false).status, 201);
  EXPECT_EQ(data(tb, "GET", "/v1/files/stat?path=/tmp/only-a").status, 404);
  EXPECT_EQ(data(ta, "GET", "/v1/files/stat?path=/tmp/only-a").status, 200);
  Reply wrong = data(ta, "POST", "/v1/files?path=/tmp/only-a");
  EXPECT_EQ(wrong.status, 405) << wrong.body;
  EXPECT_EQ(wrong.header("Allow"), "GET, PUT, DELETE");
  // A process of A is not B's to feed or signal.
  {
    auto [s, pid] = startExec(ta, R"({"cmd":["cat"],"stdin":true})");
    ASSERT_TRUE(s);
    std::string p = "/v1/processes/" + std::to_string(pid);
    EXPECT_EQ(data(tb, "POST", p + "/stdin", "from b\n", false).status, 404);
    EXPECT_EQ(data(ta, "POST", p + "/close-stdin").status, 204);
    ASSERT_TRUE(waitForExit(*s));
    EXPECT_EQ(collect(s->reply().body).out, "");
  }

  // The other tenant cannot open a session on A, nor learn it exists.
  Reply foreign = api("POST", "/v1/sandboxes/" + a + "/sessions", "", key2_);
  EXPECT_EQ(foreign.status, 404) << foreign.body;
  // The planes do not accept each other's credentials.
  EXPECT_EQ(data(d_->key(), "GET", "/v1/files/stat?path=/").status, 401);
  EXPECT_EQ(data(key2_, "GET", "/v1/files/stat?path=/").status, 401);
  EXPECT_EQ(api("GET", "/v1/sandboxes", "", ta).status, 401);
  Reply none = data("", "GET", "/v1/files/stat?path=/");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(str(none.js(), "code"), "unauthenticated");
  EXPECT_EQ(data("vst_" + std::string(64, '0'), "GET", "/v1/files/stat?path=/").status, 401);
  EXPECT_EQ(data(ta, "PUT", "/v1/files?path=/tmp/x", "y", false).status, 201);
  EXPECT_EQ(data("vst_nope", "PUT", "/v1/files?path=/tmp/x", "y", false).status, 401);

  // Session requests: bad bodies, unknown and non-running sandboxes.
  EXPECT_EQ(api("POST", "/v1/sandboxes/" + a + "/sessions", R"({"ttl_seconds":0})").status, 400);
  EXPECT_EQ(api("POST", "/v1/sandboxes/" + a + "/sessions", R"({"bogus":1})").status, 400);
  EXPECT_EQ(api("GET", "/v1/sandboxes/" + a + "/sessions").status, 405);
  EXPECT_EQ(api("POST", "/v1/sandboxes/sb-000000000000/sessions").status, 404);
  {
    auto db = store::openSqlite(d_->stateDir() + "/vessel.db");
    ASSERT_TRUE(db.ok());
    store::SandboxRecord p{"sb-pausedrecord", "dev", "minimal", store::SandboxState::kPaused};
    ASSERT_TRUE((*db)->insertSandbox(p).ok());
  }
  Reply paused = api("POST", "/v1/sandboxes/sb-pausedrecord/sessions");
  EXPECT_EQ(paused.status, 409) << paused.body;
  EXPECT_EQ(str(paused.js().at("details"), "state"), "paused");

  // A short-lived token works; its expiry is proven by the clock in
  // src/api/sessions_test.cc rather than by sleeping here.
  std::string short_lived = session(a, R"({"ttl_seconds":1})");
  EXPECT_EQ(data(short_lived, "GET", "/v1/files/stat?path=/").status, 200);

  // Deleting B revokes its tokens, also one whose stream is open; A's live on.
  {
    Request w;
    w.target = "/v1/files/watch?path=/tmp";
    w.bearer = tb;
    auto s = HttpStream::open(d_->dataPort(), w);
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->readUntil([](const std::string& b) { return !parseSse(b).empty(); }));
    deleteSandbox(b);
    s->readAll();  // the stream ends with its VM
    auto ev = parseSse(s->reply().body);
    EXPECT_EQ(ev.back().type, "error") << s->reply().body;
  }
  Reply revoked = data(tb, "GET", "/v1/files/stat?path=/");
  EXPECT_EQ(revoked.status, 401);
  EXPECT_EQ(str(revoked.js(), "code"), "unauthenticated");
  EXPECT_EQ(data(ta, "GET", "/v1/files/stat?path=/").status, 200);
  auto db = store::openSqlite(d_->stateDir() + "/vessel.db");
  ASSERT_TRUE(db.ok());
  EXPECT_FALSE((*db)->sessionForToken(sha256Hex(tb))->has_value()) << "deleted, not just refused";
  EXPECT_TRUE((*db)->sessionForToken(sha256Hex(ta))->has_value());
  EXPECT_FALSE((*db)->sessionForToken(ta)->has_value()) << "stored hashed";
  deleteSandbox(a);
  EXPECT_EQ(data(ta, "GET", "/v1/files/stat?path=/").status, 401);
}

// The CLI on top of the data plane: exit codes pass through, output is
// streamed to ours, stdin with -i, and cp round-trips a file byte for byte.
TEST_F(DataPlaneTest, CliExecAndCp) {
  std::string id = createSandbox();
  ASSERT_FALSE(id.empty());
  ScratchDir local;
  auto vessel = [&](std::vector<std::string> args, const std::string& input = "") {
    std::string out_path = local.path() + "/out", err_path = local.path() + "/err",
                in_path = local.path() + "/in";
    std::ofstream(in_path, std::ios::binary) << input;
    auto out = Fd::open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    auto err = Fd::open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    auto in = Fd::open(in_path, O_RDONLY);
    SpawnOptions so;
    so.argv = {VESSEL_CLI_PATH};
    for (auto& a : args) so.argv.push_back(a);
    so.env = {"VESSEL_API_URL=" + d_->url(), "VESSEL_API_KEY=" + d_->key()};
    so.fds = {{in->get(), 0}, {out->get(), 1}, {err->get(), 2}};
    so.die_with_parent = true;
    auto p = ChildProcess::spawn(so);
    EXPECT_TRUE(p.ok());
    auto w = p->waitFor(120s);
    EXPECT_TRUE(w.ok());
    ExitStatus e = w.ok() ? *w : p->terminate(1s);
    std::ifstream o(out_path, std::ios::binary), r(err_path, std::ios::binary);
    std::string outs((std::istreambuf_iterator<char>(o)), {}),
        errs((std::istreambuf_iterator<char>(r)), {});
    return std::make_tuple(e.exited ? e.code : -1, outs, errs);
  };
  auto [code, out, err] = vessel({"exec", id, "--", "sh", "-c", "echo hi; echo oops >&2; exit 7"});
  EXPECT_EQ(code, 7) << err;
  EXPECT_EQ(out, "hi\n");
  EXPECT_EQ(err, "oops\n");
  auto [c2, o2, e2] = vessel({"exec", "--user", "root", "-e", "A=b", "-w", "/tmp", id, "--", "sh",
                              "-c", "echo $(id -u) $A $PWD"});
  EXPECT_EQ(c2, 0) << e2;
  EXPECT_EQ(o2, "0 b /tmp\n");
  auto [c3, o3, e3] = vessel({"exec", "-i", id, "--", "wc", "-c"}, std::string(100000, 'x'));
  EXPECT_EQ(c3, 0) << e3;
  EXPECT_THAT(o3, HasSubstr("100000"));
  auto [c4, o4, e4] = vessel({"exec", id, "--", "/nonexistent"});
  EXPECT_EQ(c4, 127) << e4;
  auto [c5, o5, e5] = vessel({"exec", "sb-000000000000", "--", "true"});
  EXPECT_EQ(c5, 125) << e5;
  // -t: a pty in the guest (our stdin is a file, not a terminal).
  auto [ct, ot, et] = vessel({"exec", "-t", id, "--", "sh", "-c", "tty; exit 4"});
  EXPECT_EQ(ct, 4) << et;
  EXPECT_THAT(ot, HasSubstr("/dev/pts/")) << et;
  // shell: an interactive shell on a pty, fed from stdin; its exit code is ours.
  auto [cs, os, es] = vessel({"shell", id}, "echo shell-$((6*7))\nexit 5\n");
  EXPECT_EQ(cs, 5) << os << es;
  EXPECT_THAT(os, HasSubstr("shell-42")) << es;

  // cp in and out; the copy is byte-for-byte the original.
  std::string blob(1 << 20, '\0');
  std::mt19937_64 rng(7);
  for (auto& ch : blob) ch = static_cast<char>(rng());
  std::ofstream(local.path() + "/blob", std::ios::binary) << blob;
  auto [c6, o6, e6] = vessel({"cp", local.path() + "/blob", id + ":/home/user/"});
  EXPECT_EQ(c6, 0) << e6;
  auto [c7, o7, e7] = vessel({"exec", id, "--", "sha256sum", "/home/user/blob"});
  EXPECT_EQ(o7.substr(0, 64), sha256Hex(blob)) << e7;
  auto [c8, o8, e8] = vessel({"cp", id + ":/home/user/blob", local.path() + "/back"});
  EXPECT_EQ(c8, 0) << e8;
  std::ifstream back(local.path() + "/back", std::ios::binary);
  EXPECT_EQ(sha256Hex(std::string((std::istreambuf_iterator<char>(back)), {})), sha256Hex(blob));
  auto [c9, o9, e9] = vessel({"cp", id + ":/nonexistent", local.path() + "/x"});
  EXPECT_EQ(c9, 1);
  EXPECT_THAT(e9, HasSubstr("No such file"));
  deleteSandbox(id);
}

}  // namespace
}  // namespace vessel
