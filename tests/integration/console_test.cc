// The web console (docs/console.md) on a real vesseld with real guests:
// its files and their headers on the API listener, the data-plane relay
// it uses for terminals and files, and then the console itself driven in
// Debian's chromium by console/test/drive.mjs (playwright-core): sign in,
// create a sandbox and see it appear, `echo hi` in its terminal, upload a
// file and download it back, delete it. Screenshots of each page go to
// <build>/console-screenshots.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "base/child_process.h"
#include "base/fd.h"
#include "http_client.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Reply;

// Written out here, not taken from vesseld/console.h: a weaker policy there
// fails this test.
constexpr const char* kPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

class ConsoleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    d_ = new testing::Vesseld(VESSELD_PATH, {"--console-dir", CONSOLE_DIR, "--warm-pool", "none",
                                             "--no-egress", "--operator-tenant", "dev"});
    ASSERT_TRUE(d_->start()) << "vesseld did not come up; log:\n" << d_->log();
  }
  static void TearDownTestSuite() { testing::endSuite(d_); }
  static testing::Vesseld* d_;
};
testing::Vesseld* ConsoleTest::d_ = nullptr;

TEST_F(ConsoleTest, ServesItsFilesWithAStrictPolicy) {
  Reply index = d_->call("GET", "/console", "", "");
  ASSERT_EQ(index.status, 200) << index.body;
  EXPECT_EQ(index.header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(index.header("Content-Security-Policy"), kPolicy);
  EXPECT_EQ(index.header("X-Content-Type-Options"), "nosniff");
  EXPECT_THAT(index.body, HasSubstr("/console/app.js"));
  // Nothing the page names is fetched from elsewhere.
  EXPECT_THAT(index.body, Not(HasSubstr("//")));
  Reply js = d_->call("GET", "/console/vendor/xterm.js", "", "");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.header("Content-Type"), "text/javascript; charset=utf-8");
  Reply css = d_->call("GET", "/console/style.css", "", "");
  EXPECT_EQ(css.header("Content-Type"), "text/css; charset=utf-8");
  for (const char* target :
       {"/console/../v1/sandboxes", "/console/%2e%2e/healthz",
        "/console/vendor/../../../../etc/passwd", "/console/vendor/", "/console/.vessel-lock"}) {
    // The router refuses a malformed path (an empty or encoded segment)
    // as 400 before any route; the file routes answer 404.
    Reply r = d_->call("GET", target, "", "");
    EXPECT_TRUE(r.status == 404 || r.status == 400) << target << ": " << r.status << " " << r.body;
    EXPECT_THAT(r.body, Not(HasSubstr("root:"))) << target;
  }
  // The files are served without a key (they hold none); the API is not.
  EXPECT_EQ(d_->call("GET", "/v1/sandboxes", "", "").status, 401);
}

TEST_F(ConsoleTest, RelaysTheDataPlaneWithASessionToken) {
  std::string why;
  std::string id = d_->createSandbox(R"({"template":"minimal"})", &why);
  ASSERT_FALSE(id.empty()) << why;
  std::string token = d_->session(id);
  ASSERT_FALSE(token.empty());
  testing::Request req;
  req.method = "POST";
  req.target = "/console/data/v1/exec";
  req.body = R"({"shell":"echo relayed"})";
  req.bearer = token;
  Reply r = testing::call(d_->port(), req);
  ASSERT_EQ(r.status, 200) << r.body;
  auto out = testing::collectExec(r.body);
  EXPECT_EQ(out.out, "relayed\n");
  // The data plane itself refuses what it would refuse on its own port.
  req.bearer = "vst_" + std::string(64, '0');
  EXPECT_EQ(testing::call(d_->port(), req).status, 401);
  // An API key is not a session token there either.
  req.bearer = d_->key();
  EXPECT_EQ(testing::call(d_->port(), req).status, 401);
  EXPECT_TRUE(d_->deleteSandbox(id));
}

// Long enough for a sandbox's create under TCG and the browser's steps.
TEST_F(ConsoleTest, DrivenInAHeadlessBrowser) {
  ASSERT_TRUE(fs::exists("/usr/bin/chromium")) << "scripts/setup.sh installs chromium";
  testing::ScratchDir io;
  fs::remove_all(SCREENSHOT_DIR);
  auto out = Fd::open(io.path() + "/out", O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_TRUE(out.ok());
  SpawnOptions so;
  so.argv = {NODE_PATH, CONSOLE_DRIVER};
  so.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + io.path(),
            "VESSEL_CONSOLE_URL=" + d_->url(), "VESSEL_API_KEY=" + d_->key(),
            std::string("VESSEL_SCREENSHOT_DIR=") + SCREENSHOT_DIR};
  so.fds = {{out->get(), 1}, {out->get(), 2}};
  so.die_with_parent = true;
  auto p = ChildProcess::spawn(so);
  ASSERT_TRUE(p.ok()) << p.error().message();
  auto e = p->waitFor(std::chrono::seconds(240));
  std::ifstream f(io.path() + "/out");
  std::string log(std::istreambuf_iterator<char>(f), {});
  ASSERT_TRUE(e.ok() && e->exited && e->code == 0) << "console driver failed:\n"
                                                   << log << "\nvesseld:\n"
                                                   << d_->log();
  EXPECT_THAT(log, HasSubstr("console: ok"));
  EXPECT_THAT(log, HasSubstr("csp violations: 0")) << log;
  // The sandbox it made is gone, as the page said.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("sandbox (\\S+)"))) << log;
  Reply g = d_->call("GET", "/v1/sandboxes/" + m[1].str());
  EXPECT_TRUE(g.status == 404 || g.body.find("\"deleted\"") != std::string::npos ||
              g.body.find("\"deleting\"") != std::string::npos)
      << g.body;
  for (const char* page : {"signin", "sandboxes", "terminal", "files", "logs", "metrics",
                           "templates", "operator", "deleted"})
    EXPECT_TRUE(fs::exists(fs::path(SCREENSHOT_DIR) / (std::string(page) + ".png"))) << page;
}

}  // namespace
}  // namespace vessel
