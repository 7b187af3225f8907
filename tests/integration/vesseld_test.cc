// Runs the real vesseld binary: /healthz names the backend and the
// acceleration in use, two instances with different state directories live
// side by side, and a second instance on the same state directory is refused.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <thread>

#include "base/child_process.h"
#include "guest_env.h"

namespace vessel {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::ScratchDir;

// GET a path; empty optional while nothing listens.
std::optional<std::string> get(uint16_t port, const std::string& path) {
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  boost::system::error_code ec;
  s.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) return std::nullopt;
  http::request<http::string_body> req{http::verb::get, path, 11};
  req.set(http::field::host, "127.0.0.1");
  http::write(s, req, ec);
  boost::beast::flat_buffer b;
  http::response<http::string_body> res;
  http::read(s, b, res, ec);
  if (ec) return std::nullopt;
  return res.body();
}

struct Daemon {
  ChildProcess proc;
  uint16_t port;
  std::string log;
};

Daemon start(const std::string& state_dir, const std::string& cache_dir, const std::string& log) {
  uint16_t port = testing::freePort();
  auto out = Fd::open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  EXPECT_TRUE(out.ok());
  SpawnOptions so;
  so.argv = {VESSELD_PATH,
             "--state-dir",
             state_dir,
             "--cache-dir",
             cache_dir,
             "--listen",
             "127.0.0.1:" + std::to_string(port),
             "--data-listen",
             "127.0.0.1:" + std::to_string(testing::freePort()),
             "--e2b-listen",
             "127.0.0.1:" + std::to_string(testing::freePort()),
             "--e2b-envd-listen",
             "",
             "--kernel",
             testing::kernelPath(),
             "--minimal-image",
             testing::minimalImage()};
  so.fds = {{out->get(), 1}, {out->get(), 2}};
  so.die_with_parent = true;
  auto p = ChildProcess::spawn(so);
  EXPECT_TRUE(p.ok()) << p.error().message();
  return {std::move(*p), port, log};
}

std::optional<boost::json::value> waitHealthy(Daemon& d) {
  // Bounded: the KVM probe has a 5 s deadline (the verdict may be cached)
  // and the first start builds the minimal template (one guest boot).
  for (int i = 0; i < 4000; ++i) {
    if (auto body = get(d.port, "/healthz")) return boost::json::parse(*body);
    if (d.proc.tryWait()) return std::nullopt;
    std::this_thread::sleep_for(50ms);
  }
  return std::nullopt;
}

TEST(VesseldTest, HealthzTwoInstancesAndStateDirLock) {
  ScratchDir dir;
  std::string a = dir.path() + "/a", b = dir.path() + "/b", cache = dir.path() + "/cache";
  Daemon d1 = start(a, cache, dir.path() + "/a.log");
  auto h1 = waitHealthy(d1);
  ASSERT_TRUE(h1) << readFile(d1.log).value_or("");
  EXPECT_EQ(h1->at("status"), "ok");
  EXPECT_EQ(h1->at("hypervisor"), "qemu");
  std::string accel(h1->at("accel").as_string());
  EXPECT_TRUE(accel == "kvm" || accel == "tcg") << accel;
  EXPECT_FALSE(h1->at("accel_reason").as_string().empty());
  EXPECT_EQ(h1->at("state_dir").as_string(), a);

  Daemon d2 = start(b, cache, dir.path() + "/b.log");
  auto h2 = waitHealthy(d2);
  ASSERT_TRUE(h2) << readFile(d2.log).value_or("");
  EXPECT_EQ(h2->at("state_dir").as_string(), b);
  EXPECT_NE(h1->at("instance_id"), h2->at("instance_id"));
  // The second reused the first one's probe verdict (same host, same cache).
  EXPECT_EQ(h2->at("accel"), h1->at("accel"));

  // Same state dir as d1: refused with a clear message, d1 unharmed.
  Daemon d3 = start(a, cache, dir.path() + "/c.log");
  auto st = d3.proc.waitFor(30s);
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->success());
  EXPECT_THAT(readFile(d3.log).value_or(""), HasSubstr("another vesseld is using state dir"));
  EXPECT_TRUE(get(d1.port, "/healthz").has_value());

  // Each instance's files are in its own directory only.
  for (const auto& f : {"/vessel.db", "/vesseld.lock"}) {
    EXPECT_EQ(::access((a + f).c_str(), F_OK), 0) << a << f;
    EXPECT_EQ(::access((b + f).c_str(), F_OK), 0) << b << f;
  }
  // SIGTERM stops cleanly.
  auto e1 = d1.proc.terminate(10s);
  EXPECT_TRUE(e1.exited && e1.code == 0) << e1.describe();
  auto e2 = d2.proc.terminate(10s);
  EXPECT_TRUE(e2.exited && e2.code == 0) << e2.describe();
}

TEST(VesseldTest, BadFlagsAreRefusedWithAReason) {
  ScratchDir dir;
  SpawnOptions so;
  std::string log = dir.path() + "/log";
  auto out = Fd::open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_TRUE(out.ok());
  so.argv = {VESSELD_PATH,
             "--state-dir",
             dir.path(),
             "--accel",
             "xen",
             "--kernel",
             testing::kernelPath(),
             "--minimal-image",
             testing::minimalImage()};
  so.fds = {{out->get(), 2}};
  auto p = ChildProcess::spawn(so);
  ASSERT_TRUE(p.ok());
  auto st = p->waitFor(10s);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->code, 2);
  EXPECT_THAT(readFile(log).value_or(""), HasSubstr("auto, kvm or tcg"));
}

}  // namespace
}  // namespace vessel
