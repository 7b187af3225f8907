#pragma once
// The fixture of envd's tests against the real agent run on the host
// (agentclient's HostAgent): an envd on a loopback server whose one live
// sandbox, sb-1, is that agent (envd_test.cc: processes and streams;
// envd_files_test.cc: files and the filesystem service;
// envd_boundary_test.cc: the listener as a boundary).
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "agentclient/testing/agent_harness.h"
#include "e2b/envd/connect.h"
#include "e2b/envd/envd.h"
#include "e2b/envd/test_client.h"
#include "http/server.h"

// Not in an anonymous namespace: both test files' TEST_Fs share this one
// fixture class (GoogleTest wants one fixture type per suite).
namespace vessel::e2b::envd::fixture {

namespace json = boost::json;
namespace asio = boost::asio;
using namespace std::chrono_literals;
using agentclient::testing::runFor;

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
    sb.live_ids = [this] {
      ++live_asked_;
      return std::vector<std::string>{"sb-0", "sb-1"};
    };
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
  int live_asked_ = 0;  // how often envd asked for the live sandboxes
  std::string dir_;
};

inline json::object startReq(const std::string& cmd, bool stdin_open = false) {
  json::array args;
  args.emplace_back("-c");
  args.emplace_back(cmd);
  return json::object{{"process", json::object{{"cmd", "/bin/sh"}, {"args", args}}},
                      {"stdin", stdin_open}};
}

inline const std::string kRoot = "Authorization: Basic cm9vdDo=\r\n";  // "root:"

}  // namespace vessel::e2b::envd::fixture
