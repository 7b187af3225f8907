// envd against the real agent run on the host (agentclient's HostAgent): the
// Connect wire format, tokens, processes outliving their stream, terminals,
// stream deadlines, cuts and keep-alive (files and the filesystem service:
// envd_files_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

#include "e2b/envd/envd_fixture_test.h"
#include "e2b/envd/services.h"

namespace vessel::e2b::envd {
namespace {

using namespace std::chrono_literals;
using agentclient::testing::runFor;
using fixture::EnvdTest;
using fixture::kRoot;
using fixture::startReq;
using ::testing::HasSubstr;
using ::testing::Not;

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

}  // namespace
}  // namespace vessel::e2b::envd
