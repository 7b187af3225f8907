// Static files on a real HttpServer, asked over TCP with raw request lines
// (so nothing normalises a path before the server sees it): files with
// their types and the caller's headers, the index at the prefix, and every
// way out of the directory (dot segments, encoded ones, symlinks, hidden
// files, directories) refused.
#include "http/static_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "http/server.h"

namespace vessel::http {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using tcp = asio::ip::tcp;

constexpr const char* kCsp = "default-src 'self'; frame-ancestors 'none'";

template <typename T>
std::optional<Code> codeOf(const Result<T>& r) {
  if (r.ok()) return std::nullopt;
  return r.error().code();
}

void put(const fs::path& p, const std::string& body) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << body;
}

class StaticFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vessel-static-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ / "console";
    put(dir_ / "index.html", "<!doctype html>index");
    put(dir_ / "app.js", "console.log(1)");
    put(dir_ / "vendor/xterm.css", ".xterm{}");
    put(dir_ / "vendor/blob.bin", "raw");
    put(dir_ / ".hidden", "HIDDEN-CONTENT");
    put(root_ / "secret.txt", "OUTSIDE-CONTENT");
    fs::create_symlink(root_ / "secret.txt", dir_ / "link.txt");
    auto files = StaticFiles::load(dir_.string());
    ASSERT_TRUE(files.ok()) << files.error().message();
    EXPECT_EQ(files->size(), 4u);  // not .hidden, not the link
    auto shared = std::make_shared<const StaticFiles>(std::move(*files));
    StaticFiles::install(server_.router(), "/console", shared, {{"Content-Security-Policy", kCsp}});
    ASSERT_TRUE(server_.listen({"127.0.0.1", 0}).ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    asio::post(io_, [this] { server_.close(); });
    io_.stop();
    if (thread_.joinable()) thread_.join();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  Response get(const std::string& target) {
    asio::io_context cio;
    tcp::socket s(cio);
    s.connect({asio::ip::make_address("127.0.0.1"), server_.port()});
    std::string raw = "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    asio::write(s, asio::buffer(raw));
    boost::beast::flat_buffer b;
    Response res;
    read(s, b, res);
    return res;
  }

  fs::path root_, dir_;
  asio::io_context io_;
  HttpServer server_{io_};
  std::thread thread_;
};

TEST_F(StaticFilesTest, ServesFilesWithTheirTypesAndHeaders) {
  struct Case {
    const char* target;
    const char* body;
    const char* type;
  };
  for (const Case& c :
       {Case{"/console", "<!doctype html>index", "text/html; charset=utf-8"},
        Case{"/console/", "<!doctype html>index", "text/html; charset=utf-8"},
        Case{"/console/index.html", "<!doctype html>index", "text/html; charset=utf-8"},
        Case{"/console/app.js", "console.log(1)", "text/javascript; charset=utf-8"},
        Case{"/console/app.js?v=2", "console.log(1)", "text/javascript; charset=utf-8"},
        Case{"/console/vendor/xterm.css", ".xterm{}", "text/css; charset=utf-8"},
        Case{"/console/vendor/blob.bin", "raw", "application/octet-stream"}}) {
    auto r = get(c.target);
    EXPECT_EQ(r.result(), status::ok) << c.target;
    EXPECT_EQ(r.body(), c.body) << c.target;
    EXPECT_EQ(r[field::content_type], c.type) << c.target;
    EXPECT_EQ(r["Content-Security-Policy"], kCsp) << c.target;
    EXPECT_EQ(r["X-Content-Type-Options"], "nosniff") << c.target;
  }
}

TEST_F(StaticFilesTest, RefusesEveryWayOutOfTheDirectory) {
  for (const char* target :
       {"/console/../secret.txt", "/console/vendor/../../secret.txt", "/console/%2e%2e/secret.txt",
        "/console/..%2fsecret.txt", "/console/link.txt", "/console/.hidden", "/console/./app.js",
        "/console//app.js", "/console/vendor", "/console/vendor/", "/console/nope.js",
        "/console/a/b/c/d/e.js", "/console/vendor\\..\\..\\secret.txt"}) {
    // The router refuses a malformed path (an empty or encoded segment) as
    // 400 before any route; the file routes answer 404.
    auto r = get(target);
    EXPECT_TRUE(r.result() == status::not_found || r.result() == status::bad_request)
        << target << ": " << r.result_int();
    EXPECT_THAT(r.body(), ::testing::Not(HasSubstr("OUTSIDE-CONTENT"))) << target;
    EXPECT_THAT(r.body(), ::testing::Not(HasSubstr("HIDDEN-CONTENT"))) << target;
  }
}

TEST_F(StaticFilesTest, AnswersWithTheHeadersWhenAFileIsMissing) {
  auto r = get("/console/missing.html");
  EXPECT_EQ(r.result(), status::not_found);
  EXPECT_EQ(r["Content-Security-Policy"], kCsp);
  EXPECT_EQ(r["X-Content-Type-Options"], "nosniff");
}

TEST(StaticFilesPaths, CheckAssetPath) {
  EXPECT_TRUE(checkAssetPath("app.js", 3).ok());
  EXPECT_TRUE(checkAssetPath("vendor/xterm.css", 3).ok());
  for (const char* bad : {"", ".", "..", "../x", "a//b", "/a", "a/", ".git", "a/.b", "a%2e", "a b",
                          "a\\b", "a/b/c/d"})
    EXPECT_EQ(codeOf(checkAssetPath(bad, 3)), Code::kNotFound) << bad;
}

TEST(StaticFilesLoad, RefusesAMissingDirectoryAndTooMuch) {
  EXPECT_FALSE(StaticFiles::load("/nonexistent/vessel-console").ok());
  char tmpl[] = "/tmp/vessel-static-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  fs::path root = tmpl;
  put(root / "a.js", std::string(100, 'a'));
  put(root / "b.js", std::string(100, 'b'));
  EXPECT_EQ(codeOf(StaticFiles::load(root.string(), StaticLimits{1, 1 << 20, 3})),
            Code::kResourceExhausted);
  EXPECT_EQ(codeOf(StaticFiles::load(root.string(), StaticLimits{16, 150, 3})),
            Code::kResourceExhausted);
  EXPECT_TRUE(StaticFiles::load(root.string(), StaticLimits{16, 200, 3}).ok());
  fs::remove_all(root);
}

}  // namespace
}  // namespace vessel::http
