// envd against the real agent run on the host (agentclient's HostAgent): the
// Connect wire format, tokens, processes outliving their stream, files.
#include "e2b/envd/envd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "agentclient/testing/agent_harness.h"
#include "e2b/envd/connect.h"
#include "e2b/envd/services.h"
#include "e2b/envd/signature.h"
#include "e2b/envd/test_client.h"

namespace vessel::e2b::envd {
namespace {

namespace json = boost::json;
namespace asio = boost::asio;
using namespace std::chrono_literals;
using agentclient::testing::runFor;
using ::testing::HasSubstr;
using ::testing::Not;

class EnvdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto h = agentclient::testing::HostAgent::start(io_, VESSEL_AGENT_BINARY);
    ASSERT_TRUE(h.ok()) << h.error().message();
    agent_ = std::move(*h);
    Sandboxes sb;
    sb.agent_of = [this](const std::string& id) -> std::shared_ptr<agentclient::AgentClient> {
      return id == "sb-1" && alive_ ? agent_->client() : nullptr;
    };
    sb.live_ids = [] { return std::vector<std::string>{"sb-0", "sb-1"}; };
    envd_ = std::make_unique<Envd>(io_, std::move(sb), tokens_);
    envd_->install(server_);
    ASSERT_TRUE(server_.listen(HostPort{"127.0.0.1", 0}).ok());
    dir_ = "/tmp/envd-test-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    server_.close();
    std::filesystem::remove_all(dir_);
  }

  std::string headers(const std::string& method, const std::string& target,
                      const std::string& ctype, const std::string& extra = "") {
    return method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nE2b-Sandbox-Id: sb-1\r\n" +
           "X-Access-Token: " + tokens_.forSandbox("sb-1") + "\r\nContent-Type: " + ctype + "\r\n" +
           extra;
  }
  Result<Reply> unary(const std::string& method, const json::object& msg,
                      const std::string& extra = "") {
    return runFor(io_,
                  request(server_.port(), headers("POST", method, "application/json", extra),
                          json::serialize(msg)),
                  30s);
  }
  Result<Reply> stream(const std::string& method, const json::object& msg,
                       const std::string& extra = "") {
    return runFor(
        io_,
        request(server_.port(), headers("POST", method, "application/connect+json", extra),
                encodeEnvelope(0, json::serialize(msg))),
        30s);
  }

  asio::io_context io_;
  AccessTokens tokens_ = AccessTokens::withKey(std::string(32, 'k'));
  std::unique_ptr<agentclient::testing::HostAgent> agent_;
  std::unique_ptr<Envd> envd_;
  http::HttpServer server_{io_, http::ServerLimits{16 * 1024, 64 << 20, std::chrono::seconds(60)}};
  bool alive_ = true;
  std::string dir_;
};

json::object startReq(const std::string& cmd, bool stdin_open = false) {
  json::array args;
  args.emplace_back("-c");
  args.emplace_back(cmd);
  return json::object{{"process", json::object{{"cmd", "/bin/sh"}, {"args", args}}},
                      {"stdin", stdin_open}};
}

const std::string kRoot = "Authorization: Basic cm9vdDo=\r\n";  // "root:"

TEST_F(EnvdTest, StartStreamsOutputAndTheExitThenEndsTheStream) {
  auto r = stream("/process.Process/Start", startReq("echo out; echo err >&2; exit 3"), kRoot);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers["content-type"], "application/connect+json");
  ASSERT_TRUE(r->complete);
  auto env = envelopes(r->body);
  ASSERT_GE(env.size(), 3u);
  auto first = json::parse(env.front().data).as_object();
  EXPECT_GT(first.at("event").at("start").at("pid").as_int64(), 0);
  std::string out, err;
  json::object end;
  for (size_t i = 1; i + 1 < env.size(); ++i) {
    auto ev = json::parse(env[i].data).as_object().at("event").as_object();
    if (auto* d = ev.if_contains("data")) {
      auto& o = d->as_object();
      if (o.contains("stdout")) out += std::string(o.at("stdout").as_string());
      if (o.contains("stderr")) err += std::string(o.at("stderr").as_string());
    }
    if (auto* e = ev.if_contains("end")) end = e->as_object();
  }
  EXPECT_EQ(out, "b3V0Cg==");  // "out\n"
  EXPECT_EQ(err, "ZXJyCg==");  // "err\n"
  EXPECT_EQ(end.at("exitCode").as_int64(), 3);
  EXPECT_EQ(end.at("status").as_string(), "exit status 3");
  EXPECT_EQ(env.back().flags, kFlagEndStream);
  EXPECT_EQ(env.back().data, "{}");
}

TEST_F(EnvdTest, EveryCallNeedsTheSandboxsToken) {
  std::string head =
      "POST /process.Process/List HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: sb-1\r\n"
      "X-Access-Token: " +
      tokens_.forSandbox("sb-0") + "\r\nContent-Type: application/json\r\n";
  auto r = runFor(io_, request(server_.port(), head, "{}"), 10s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 401);
  EXPECT_THAT(r->body, HasSubstr("\"code\":\"unauthenticated\""));
  auto ok = unary("/process.Process/List", json::object());
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(EnvdTest, UnknownPidIsNotFoundInConnectsTerms) {
  json::object sel{{"process", json::object{{"pid", 999999}}}};
  auto r =
      unary("/process.Process/SendSignal",
            json::object{{"process", json::object{{"pid", 999999}}}, {"signal", "SIGNAL_SIGKILL"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_THAT(r->body, HasSubstr("not_found"));
  // A stream carries its error in the end-of-stream envelope, with a 200.
  auto c = stream("/process.Process/Connect", sel);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, 200) << c->body;
  EXPECT_EQ(c->headers["content-type"], "application/connect+json");
  auto env = envelopes(c->body);
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(env[0].flags, kFlagEndStream);
  EXPECT_THAT(env[0].data, HasSubstr("\"code\":\"not_found\""));
}

TEST_F(EnvdTest, AProcessOutlivesItsStreamAndTakesInputWithNoneOpen) {
  // Start `cat` with stdin open; our stream ends (the connection closes)
  // once we have its pid.
  int64_t pid = 0;
  {
    auto r = stream("/process.Process/Start",
                    startReq("read line; echo got:$line; sleep 0.2; echo bye", true),
                    kRoot + "Connect-Timeout-Ms: 300\r\n");
    // The deadline above ends this stream (and bounds the process): use a
    // second one without a deadline to have a process that outlives it.
    ASSERT_TRUE(r.ok());
  }
  auto started = std::make_shared<std::optional<Result<Reply>>>();
  // A Start stream we abandon: read only its head and first envelope.
  auto abandon = [&]() -> asio::awaitable<Result<int64_t>> {
    auto ex = co_await asio::this_coro::executor;
    asio::ip::tcp::socket s(ex);
    co_await s.async_connect({asio::ip::make_address("127.0.0.1"), server_.port()},
                             asio::as_tuple(asio::use_awaitable));
    std::string body =
        encodeEnvelope(0, json::serialize(startReq("read line; echo got:$line", true)));
    std::string req = headers("POST", "/process.Process/Start", "application/connect+json", kRoot) +
                      "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    co_await asio::async_write(s, asio::buffer(req), asio::as_tuple(asio::use_awaitable));
    std::string raw;
    char buf[4096];
    while (raw.find("\"pid\":") == std::string::npos) {
      auto [ec, n] =
          co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      if (ec) co_return Error(Code::kUnavailable, "stream closed early: " + raw);
      raw.append(buf, n);
    }
    auto at = raw.find("\"pid\":") + 6;
    co_return static_cast<int64_t>(std::stol(raw.substr(at)));
  };
  auto p = runFor(io_, abandon(), 20s);  // the socket closes as the coroutine ends
  ASSERT_TRUE(p.ok()) << p.error().message();
  pid = *p;
  // Still running, and listed.
  auto list = unary("/process.Process/List", json::object());
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(list->body, HasSubstr("\"pid\":" + std::to_string(pid)));
  // Reconnect by pid, then send input with no stream of ours carrying it.
  auto connect = [&]() -> asio::awaitable<Result<Reply>> {
    json::object sel{{"process", json::object{{"pid", pid}}}};
    co_return co_await request(
        server_.port(), headers("POST", "/process.Process/Connect", "application/connect+json"),
        encodeEnvelope(0, json::serialize(sel)));
  };
  auto input = [&]() -> asio::awaitable<Result<Reply>> {
    asio::steady_timer t(co_await asio::this_coro::executor, 300ms);
    co_await t.async_wait(asio::use_awaitable);
    json::object in{{"process", json::object{{"pid", pid}}},
                    {"input", json::object{{"stdin", "aGkK"}}}};  // "hi\n"
    co_return co_await request(server_.port(),
                               headers("POST", "/process.Process/SendInput", "application/json"),
                               json::serialize(in));
  };
  auto both = [&]() -> asio::awaitable<Result<Reply>> {
    auto ex = co_await asio::this_coro::executor;
    auto in_result = std::make_shared<std::optional<Result<Reply>>>();
    asio::co_spawn(
        ex, [&, in_result]() -> asio::awaitable<void> { in_result->emplace(co_await input()); },
        asio::detached);
    auto c = co_await connect();
    if (!*in_result || !(*in_result)->ok() || (**in_result)->status != 200)
      co_return Error(Code::kInternal, "SendInput failed");
    co_return c;
  };
  auto c = runFor(io_, both(), 30s);
  ASSERT_TRUE(c.ok()) << c.error().message();
  ASSERT_TRUE(c->complete);
  auto env = envelopes(c->body);
  std::string all;
  for (auto& e : env) all += e.data;
  EXPECT_THAT(all, HasSubstr(std::to_string(pid)));
  EXPECT_THAT(all, HasSubstr("Z290OmhpCg=="));  // "got:hi\n"
  EXPECT_THAT(all, HasSubstr("\"exitCode\":0"));
}

// A terminal's start event (the pid the SDK types into) comes once its
// program has drawn something: a shell still reading its startup files would
// otherwise get input it answers seconds later (E2B's ptyConnect test).
TEST_F(EnvdTest, ATerminalStartsOnceItsProgramHasDrawnSomething) {
  std::string drawn = dir_ + "/drawn";
  auto start = [&]() -> asio::awaitable<Result<std::string>> {
    auto ex = co_await asio::this_coro::executor;
    asio::ip::tcp::socket s(ex);
    co_await s.async_connect({asio::ip::make_address("127.0.0.1"), server_.port()},
                             asio::as_tuple(asio::use_awaitable));
    json::object msg = startReq("sleep 0.5; touch " + drawn + "; printf 'ready$ '; exec cat", true);
    msg["pty"] = json::object{{"size", json::object{{"cols", 80}, {"rows", 24}}}};
    std::string body = encodeEnvelope(0, json::serialize(msg));
    std::string req = headers("POST", "/process.Process/Start", "application/connect+json", kRoot) +
                      "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    co_await asio::async_write(s, asio::buffer(req), asio::as_tuple(asio::use_awaitable));
    std::string raw;
    char buf[4096];
    while (raw.find("\"pid\":") == std::string::npos) {
      auto [ec, n] =
          co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      if (ec) co_return Error(Code::kUnavailable, "stream closed early: " + raw);
      raw.append(buf, n);
    }
    // What the program did before its first output is done by now.
    co_return std::string(std::filesystem::exists(drawn) ? "drawn" : "not drawn yet");
  };
  auto r = runFor(io_, start(), 20s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, "drawn");
}

TEST_F(EnvdTest, StreamInputAppliesItsEnvelopesInOrderThenCloseStdin) {
  std::string out = dir_ + "/stdin.txt";
  // Start `cat` with stdin open and leave its stream once the pid is known.
  auto detached = [&]() -> asio::awaitable<Result<int64_t>> {
    auto ex = co_await asio::this_coro::executor;
    asio::ip::tcp::socket s(ex);
    co_await s.async_connect({asio::ip::make_address("127.0.0.1"), server_.port()},
                             asio::as_tuple(asio::use_awaitable));
    std::string body = encodeEnvelope(0, json::serialize(startReq("cat > " + out, true)));
    std::string req = headers("POST", "/process.Process/Start", "application/connect+json", kRoot) +
                      "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    co_await asio::async_write(s, asio::buffer(req), asio::as_tuple(asio::use_awaitable));
    std::string raw;
    char buf[4096];
    while (raw.find("\"pid\":") == std::string::npos) {
      auto [ec, n] =
          co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      if (ec) co_return Error(Code::kUnavailable, "stream closed early: " + raw);
      raw.append(buf, n);
    }
    co_return static_cast<int64_t>(std::stol(raw.substr(raw.find("\"pid\":") + 6)));
  };
  auto pid = runFor(io_, detached(), 20s);
  ASSERT_TRUE(pid.ok()) << pid.error().message();
  json::object start{{"start", json::object{{"process", json::object{{"pid", *pid}}}}}};
  json::object one{{"data", json::object{{"input", json::object{{"stdin", "b25lCg=="}}}}}};  // one
  json::object two{{"data", json::object{{"input", json::object{{"stdin", "dHdvCg=="}}}}}};  // two
  std::string body = encodeEnvelope(0, json::serialize(start)) +
                     encodeEnvelope(0, json::serialize(one)) +
                     encodeEnvelope(0, json::serialize(two)) + encodeEnvelope(kFlagEndStream, "{}");
  auto r = runFor(
      io_,
      request(server_.port(),
              headers("POST", "/process.Process/StreamInput", "application/connect+json"), body),
      20s);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  auto env = envelopes(r->body);
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(env[0].flags, kFlagEndStream);
  auto close =
      unary("/process.Process/CloseStdin", json::object{{"process", json::object{{"pid", *pid}}}});
  ASSERT_TRUE(close.ok());
  ASSERT_EQ(close->status, 200) << close->body;
  std::string got;
  for (int i = 0; i < 100 && got != "one\ntwo\n"; ++i) {
    (void)unary("/process.Process/List", json::object());  // lets the io run
    std::ifstream f(out);
    got.assign(std::istreambuf_iterator<char>(f), {});
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(got, "one\ntwo\n");
}

TEST_F(EnvdTest, ConnectTimeoutBoundsStartedProcesses) {
  auto r =
      stream("/process.Process/Start", startReq("sleep 30"), kRoot + "Connect-Timeout-Ms: 300\r\n");
  ASSERT_TRUE(r.ok());
  auto env = envelopes(r->body);
  ASSERT_FALSE(env.empty());
  EXPECT_EQ(env.back().flags, kFlagEndStream);
  EXPECT_THAT(env.back().data, HasSubstr("deadline_exceeded"));
}

TEST_F(EnvdTest, AStreamIsCutWhenTheSandboxGoesAway) {
  auto run = [&]() -> asio::awaitable<Result<Reply>> {
    auto ex = co_await asio::this_coro::executor;
    asio::co_spawn(
        ex,
        [&]() -> asio::awaitable<void> {
          asio::steady_timer t(co_await asio::this_coro::executor, 500ms);
          co_await t.async_wait(asio::use_awaitable);
          alive_ = false;
          agent_->client()->close();  // as when the VM dies
        },
        asio::detached);
    co_return co_await request(
        server_.port(),
        headers("POST", "/process.Process/Start", "application/connect+json", kRoot),
        encodeEnvelope(0, json::serialize(startReq("sleep 30"))));
  };
  auto r = runFor(io_, run(), 20s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(r->complete) << "a dead sandbox's stream must not end cleanly";
  auto h = runFor(
      io_,
      request(server_.port(), "GET /health HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: sb-1\r\n", ""),
      10s);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->status, 502);
}

TEST_F(EnvdTest, FilesRoundTripMultipartOctetGzipAndSignedUrls) {
  std::string path = dir_ + "/sub/a.txt";
  std::string mp = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + path +
                   "\"\r\n\r\nhello world\r\n--XyZ--\r\n";
  auto up = runFor(
      io_,
      request(server_.port(),
              headers("POST", "/files?username=root", "multipart/form-data; boundary=XyZ"), mp),
      20s);
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(up->status, 200) << up->body;
  EXPECT_THAT(up->body, HasSubstr("\"name\":\"a.txt\""));
  auto down = runFor(io_,
                     request(server_.port(),
                             headers("GET", "/files?username=root&path=" + path, "text/plain"), ""),
                     20s);
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(down->status, 200);
  EXPECT_EQ(down->body, "hello world");
  // Missing: 404 with envd's error body.
  auto missing =
      runFor(io_,
             request(server_.port(),
                     headers("GET", "/files?username=root&path=" + dir_ + "/nope", "x"), ""),
             20s);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
  EXPECT_THAT(missing->body, HasSubstr("\"code\":404"));
  // A signed URL with no sandbox header and no token finds its sandbox.
  std::string sig = fileSignature(path, "read", "root", tokens_.forSandbox("sb-1"), std::nullopt);
  std::string enc;
  for (char c : sig) enc += c == '+' ? "%2B" : c == '/' ? "%2F" : std::string(1, c);
  auto signed_get = runFor(io_,
                           request(server_.port(),
                                   "GET /files?path=" + path + "&username=root&signature=" + enc +
                                       " HTTP/1.1\r\nHost: x\r\n",
                                   ""),
                           20s);
  ASSERT_TRUE(signed_get.ok());
  EXPECT_EQ(signed_get->status, 200) << signed_get->body;
  EXPECT_EQ(signed_get->body, "hello world");
  auto bad = runFor(io_,
                    request(server_.port(),
                            "GET /files?path=" + path +
                                "&username=root&signature=v1_nope HTTP/1.1\r\nHost: x\r\n",
                            ""),
                    20s);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 401);
}

TEST_F(EnvdTest, RecursiveWatcherSeesUploadsAsWritesBelow) {
  std::filesystem::create_directories(dir_ + "/sub");
  auto cw = unary("/filesystem.Filesystem/CreateWatcher",
                  json::object{{"path", dir_}, {"recursive", true}}, kRoot);
  ASSERT_TRUE(cw.ok());
  ASSERT_EQ(cw->status, 200) << cw->body;
  std::string id(json::parse(cw->body).as_object().at("watcherId").as_string());
  std::filesystem::create_directories(dir_ + "/sub/later");  // watched once made
  std::string all;
  auto poll = [&](const std::string& want) {
    for (int i = 0; i < 100 && all.find(want) == std::string::npos; ++i) {
      auto ev = unary("/filesystem.Filesystem/GetWatcherEvents", json::object{{"watcherId", id}});
      ASSERT_TRUE(ev.ok());
      ASSERT_EQ(ev->status, 200) << ev->body;
      all += ev->body;
      std::this_thread::sleep_for(50ms);
    }
  };
  poll("\"name\":\"sub/later\"");  // the new directory is watched from here on
  auto up = runFor(io_,
                   request(server_.port(),
                           headers("POST", "/files?username=root&path=" + dir_ + "/sub/later/f.txt",
                                   "application/octet-stream"),
                           "abc"),
                   20s);
  ASSERT_TRUE(up.ok());
  ASSERT_EQ(up->status, 200) << up->body;
  poll("EVENT_TYPE_WRITE");
  EXPECT_THAT(all, HasSubstr("\"name\":\"sub/later/f.txt\",\"type\":\"EVENT_TYPE_WRITE\""));
  EXPECT_THAT(all, HasSubstr("\"name\":\"sub/later\""));
  auto rm = unary("/filesystem.Filesystem/RemoveWatcher", json::object{{"watcherId", id}});
  ASSERT_TRUE(rm.ok());
  EXPECT_EQ(rm->status, 200);
}

TEST_F(EnvdTest, FilesystemServiceStatListMoveRemove) {
  std::string a = dir_ + "/b", b = dir_ + "/a";
  ASSERT_TRUE(runFor(
                  io_,
                  [&]() -> asio::awaitable<Status> {
                    agentclient::WriteFileOptions o;
                    o.path = a;
                    auto w = co_await agent_->client()->writeFile(o);
                    if (!w.ok()) co_return w.error();
                    VESSEL_CO_TRY(co_await (*w)->write("12345"));
                    co_return co_await (*w)->finish();
                  }(),
                  10s)
                  .ok());
  auto st = unary("/filesystem.Filesystem/Stat", json::object{{"path", a}}, kRoot);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, 200) << st->body;
  EXPECT_THAT(st->body, HasSubstr("\"type\":\"FILE_TYPE_FILE\""));
  EXPECT_THAT(st->body, HasSubstr("\"size\":\"5\""));
  auto mk = unary("/filesystem.Filesystem/MakeDir", json::object{{"path", dir_ + "/d"}}, kRoot);
  ASSERT_TRUE(mk.ok());
  EXPECT_EQ(mk->status, 200) << mk->body;
  auto again = unary("/filesystem.Filesystem/MakeDir", json::object{{"path", dir_ + "/d"}}, kRoot);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 409);
  EXPECT_THAT(again->body, HasSubstr("already_exists"));
  auto mv =
      unary("/filesystem.Filesystem/Move", json::object{{"source", a}, {"destination", b}}, kRoot);
  ASSERT_TRUE(mv.ok());
  EXPECT_EQ(mv->status, 200) << mv->body;
  auto ls = unary("/filesystem.Filesystem/ListDir", json::object{{"path", dir_}}, kRoot);
  ASSERT_TRUE(ls.ok());
  ASSERT_EQ(ls->status, 200) << ls->body;
  auto entries = json::parse(ls->body).as_object().at("entries").as_array();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].at("name").as_string(), "a");  // sorted
  EXPECT_EQ(entries[1].at("name").as_string(), "d");
  auto rm = unary("/filesystem.Filesystem/Remove", json::object{{"path", b}}, kRoot);
  ASSERT_TRUE(rm.ok());
  EXPECT_EQ(rm->status, 200);
  auto gone = unary("/filesystem.Filesystem/Stat", json::object{{"path", b}}, kRoot);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->status, 404);
}

// A listing too large for metadata (over 1000 entries) is sorted and
// rendered on the render thread: every entry, in path order.
TEST_F(EnvdTest, ALargeListingIsRenderedWholeAndSorted) {
  std::string big = dir_ + "/big";
  std::filesystem::create_directories(big);
  constexpr int kFiles = 1500;
  for (int i = kFiles - 1; i >= 0; --i) {
    char name[16];
    std::snprintf(name, sizeof name, "f%04d", i);
    std::ofstream(big + "/" + name) << i;
  }
  auto ls = unary("/filesystem.Filesystem/ListDir", json::object{{"path", big}}, kRoot);
  ASSERT_TRUE(ls.ok());
  ASSERT_EQ(ls->status, 200) << ls->body.substr(0, 500);
  auto entries = json::parse(ls->body).as_object().at("entries").as_array();
  ASSERT_EQ(entries.size(), static_cast<size_t>(kFiles));
  EXPECT_EQ(entries.front().at("path").as_string(), big + "/f0000");
  EXPECT_EQ(entries.back().at("name").as_string(), "f1499");
  for (size_t i = 1; i < entries.size(); ++i)
    ASSERT_LT(entries[i - 1].at("name").as_string(), entries[i].at("name").as_string()) << i;
  EXPECT_FALSE(entries.front().as_object().contains("metadata"));
}

// A stream on a keep-alive connection is sent keep-alive (undici takes a
// `Connection: close` response's close as its end, so a cut would look
// ended) and, ended cleanly, leaves the connection serving the next request.
TEST_F(EnvdTest, AStreamOnAKeepAliveConnectionLeavesItUsable) {
  auto run = [&]() -> asio::awaitable<Result<std::pair<std::string, std::string>>> {
    auto ex = co_await asio::this_coro::executor;
    asio::ip::tcp::socket s(ex);
    auto [cec] = co_await s.async_connect({asio::ip::make_address("127.0.0.1"), server_.port()},
                                          asio::as_tuple(asio::use_awaitable));
    if (cec) co_return Error(Code::kUnavailable, cec.message());
    std::string body = encodeEnvelope(0, json::serialize(startReq("echo hi")));
    std::string req = headers("POST", "/process.Process/Start", "application/connect+json", kRoot) +
                      "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    co_await asio::async_write(s, asio::buffer(req), asio::as_tuple(asio::use_awaitable));
    std::string raw;
    char buf[4096];
    while (raw.find("\r\n0\r\n\r\n") == std::string::npos) {
      auto [ec, n] =
          co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      if (ec) co_return Error(Code::kUnavailable, "stream: " + ec.message() + ": " + raw);
      raw.append(buf, n);
    }
    std::string first = raw;
    std::string health = "GET /health HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: sb-1\r\n\r\n";
    co_await asio::async_write(s, asio::buffer(health), asio::as_tuple(asio::use_awaitable));
    raw.clear();
    while (raw.find("\r\n\r\n") == std::string::npos) {
      auto [ec, n] =
          co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      if (ec) co_return Error(Code::kUnavailable, "second request: " + ec.message());
      raw.append(buf, n);
    }
    co_return std::make_pair(first, raw);
  };
  auto r = runFor(io_, run(), 20s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_THAT(r->first, Not(HasSubstr("Connection: close")));
  EXPECT_THAT(r->first, HasSubstr("aGkK"));  // "hi\n"
  EXPECT_THAT(r->second, HasSubstr("HTTP/1.1 204"));
}

TEST(EnvdUsers, PasswdLines) {
  std::string passwd =
      "root:x:0:0:root:/root:/bin/bash\n"
      "broken:x:12\n"
      "odd:x:1x:5::/home/odd:/bin/sh\n"
      "dev:x:1001:1002:Dev,,,:/home/dev:/bin/bash\n"
      "rel:x:7:7::home:/bin/sh";
  auto dev = userFromPasswd(passwd, "dev");
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->uid, 1001u);
  EXPECT_EQ(dev->gid, 1002u);
  EXPECT_EQ(dev->home, "/home/dev");
  EXPECT_FALSE(userFromPasswd(passwd, "broken"));
  EXPECT_FALSE(userFromPasswd(passwd, "odd"));  // a uid that is not a number
  EXPECT_FALSE(userFromPasswd(passwd, "nobody-here"));
  EXPECT_FALSE(userFromPasswd(passwd, "de"));  // whole names only
  auto rel = userFromPasswd(passwd, "rel");
  ASSERT_TRUE(rel);
  EXPECT_EQ(rel->home, "/");  // never a relative home
}

// Users other than `user` and root come from the guest's passwd; one it
// does not have is Connect's unauthenticated, as envd answers.
TEST_F(EnvdTest, AnyGuestUserByName) {
  // `nobody` (Debian's, in the host's /etc/passwd here): "~" is its home.
  std::string nobody = "Authorization: Basic " + base64Encode("nobody:") + "\r\n";
  auto r = unary("/filesystem.Filesystem/Stat", json::object{{"path", "~"}}, nobody);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_THAT(r->body, HasSubstr("/nonexistent"));
  std::string ghost = "Authorization: Basic " + base64Encode("no-such-user:") + "\r\n";
  auto g = stream("/process.Process/Start", startReq("id -u"), ghost);
  ASSERT_TRUE(g.ok());
  EXPECT_THAT(g->body, HasSubstr("unauthenticated"));
  EXPECT_THAT(g->body, HasSubstr("no-such-user"));
}

// What E2B's SDK suite expects of the filesystem service: directories a
// user could not make alone are made by root and given to the user, a
// missing path removes fine, symlink targets are absolute.
TEST_F(EnvdTest, FilesystemAsEnvdDoesIt) {
  std::string root_only = dir_ + "/root-only";
  std::filesystem::create_directories(root_only);
  std::filesystem::permissions(root_only, std::filesystem::perms(0755));
  // No Authorization: the default user, uid 1000.
  auto mk = unary("/filesystem.Filesystem/MakeDir", json::object{{"path", root_only + "/a/b"}});
  ASSERT_TRUE(mk.ok());
  EXPECT_EQ(mk->status, 200) << mk->body;
  for (const char* d : {"/a", "/a/b"}) {
    struct stat st {};
    ASSERT_EQ(::stat((root_only + d).c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_uid, 1000u) << d;
    EXPECT_EQ(st.st_gid, 1000u) << d;
  }
  std::filesystem::create_directories(dir_ + "/f");
  std::ofstream(dir_ + "/f/file") << "x";
  auto under_file =
      unary("/filesystem.Filesystem/MakeDir", json::object{{"path", dir_ + "/f/file/sub"}});
  ASSERT_TRUE(under_file.ok());
  EXPECT_EQ(under_file->status, 400) << under_file->body;

  auto rm = unary("/filesystem.Filesystem/Remove", json::object{{"path", dir_ + "/not-there"}});
  ASSERT_TRUE(rm.ok());
  EXPECT_EQ(rm->status, 200) << rm->body;

  std::filesystem::create_symlink("file", dir_ + "/f/link");
  auto st = unary("/filesystem.Filesystem/Stat", json::object{{"path", dir_ + "/f/link"}}, kRoot);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->status, 200) << st->body;
  EXPECT_EQ(json::parse(st->body).at("entry").at("symlinkTarget").as_string(), dir_ + "/f/file");
}

}  // namespace
}  // namespace vessel::e2b::envd
