// The built-in templates `make build` installs (issue 4 item 2), restored
// from the real template store: what each promises is inside.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <cstdlib>

#include "base/run_blocking.h"
#include "base/sha256.h"
#include "guest_env.h"
#include "hypervisor/qemu/qemu.h"
#include "node/runtime.h"

namespace vessel {
namespace {

namespace asio = boost::asio;
using ::testing::HasSubstr;
using testing::ScratchDir;

class BuiltinTemplatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* root = std::getenv("VESSEL_TEMPLATE_STORE");
    ASSERT_TRUE(root && *root) << "VESSEL_TEMPLATE_STORE is not set; run through `make test`";
    store_ = std::make_unique<templates::TemplateStore>(
        root, *hypervisor::qemu::qemuVersion("qemu-system-x86_64"),
        *sha256File(testing::kernelPath()));
    node::RuntimeOptions o;
    o.root = dir_.path();
    o.kernel = testing::kernelPath();
    o.pool_size = 0;
    rt_ = std::make_unique<node::Runtime>(io_, hv_, *store_, o);
  }
  void TearDown() override {
    if (sb_) (void)runBlocking(io_, rt_->destroy(*sb_));
    EXPECT_THAT(testing::qemuProcessesUsing(dir_.path()), ::testing::IsEmpty());
  }
  void create(const std::string& name) {
    auto sb = runBlocking(io_, rt_->create(name, node::CreateOptions{}));
    ASSERT_TRUE(sb.ok()) << sb.error().message();
    sb_ = *sb;
  }
  // Output of a shell command as the template's default user; fails the
  // test on a non-zero exit.
  std::string sh(const std::string& cmd, const std::string& user = "") {
    agentclient::ExecSpec e;
    e.shell = cmd;
    e.user = user;
    auto r = runBlocking(io_, sb_->agent()->run(e));
    EXPECT_TRUE(r.ok()) << cmd << ": " << r.error().message();
    if (!r.ok()) return "<error>";
    EXPECT_TRUE(r->exit.exited && r->exit.code == 0) << cmd << ": " << r->out << r->err;
    return r->out;
  }

  ScratchDir dir_;
  asio::io_context io_;
  hypervisor::qemu::QemuHypervisor hv_{{}};
  std::unique_ptr<templates::TemplateStore> store_;
  std::unique_ptr<node::Runtime> rt_;
  std::shared_ptr<node::Sandbox> sb_;
};

TEST_F(BuiltinTemplatesTest, MinimalHasBusyboxAndAnUnprivilegedUser) {
  create("minimal");
  EXPECT_EQ(sh("id -un"), "user\n");
  EXPECT_NE(sh("id -u"), "0\n");
  EXPECT_EQ(sh("id -u", "root"), "0\n");
  EXPECT_THAT(sh("busybox 2>&1 | head -1"), HasSubstr("BusyBox"));
}

TEST_F(BuiltinTemplatesTest, DebianHasPythonCurlGitCertificatesAndUser) {
  create("debian");
  EXPECT_EQ(sh("id -un"), "user\n");
  EXPECT_NE(sh("id -u"), "0\n");
  EXPECT_EQ(sh("python3 -c 'import json, ssl; print(json.dumps(6 * 7))'"), "42\n");
  EXPECT_THAT(sh("curl --version"), HasSubstr("curl 7."));
  EXPECT_THAT(sh("git --version"), HasSubstr("git version"));
  EXPECT_EQ(sh("grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt >/dev/null && "
               "echo ok"),
            "ok\n");
  EXPECT_THAT(sh("cat /etc/debian_version"), HasSubstr("12."));
  // The user can work in its home; root-owned system files stay closed.
  EXPECT_EQ(sh("cd && echo hi > mine && cat mine"), "hi\n");
  agentclient::ExecSpec e;
  e.shell = "echo x >> /etc/passwd";
  auto r = runBlocking(io_, sb_->agent()->run(e));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_FALSE(r->exit.exited && r->exit.code == 0) << "user could write /etc/passwd";
}

}  // namespace
}  // namespace vessel
