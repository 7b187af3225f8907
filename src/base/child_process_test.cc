#include "base/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

namespace vessel {
namespace {

using namespace std::chrono_literals;

TEST(ChildProcessTest, ExitCodeIsReported) {
  auto c = ChildProcess::spawn({.argv = {"sh", "-c", "exit 7"}});
  ASSERT_TRUE(c.ok()) << c.error().message();
  auto st = c->waitFor(5s);
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->exited);
  EXPECT_EQ(st->code, 7);
}

TEST(ChildProcessTest, ExecFailureIsAnError) {
  auto c = ChildProcess::spawn({.argv = {"/nonexistent/program"}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Code::kNotFound);
  EXPECT_NE(c.error().message().find("exec"), std::string::npos);
}

TEST(ChildProcessTest, FdMappingReachesChild) {
  auto p = Pipe::create();
  ASSERT_TRUE(p.ok());
  auto c =
      ChildProcess::spawn({.argv = {"sh", "-c", "echo mapped >&5"}, .fds = {{p->write.get(), 5}}});
  ASSERT_TRUE(c.ok()) << c.error().message();
  p->write.reset();
  char buf[32] = {};
  ssize_t n = ::read(p->read.get(), buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "mapped\n");
  EXPECT_TRUE(c->waitFor(5s)->success());
}

TEST(ChildProcessTest, DestructorKillsAndReaps) {
  pid_t pid;
  {
    auto c = ChildProcess::spawn({.argv = {"sleep", "100"}});
    ASSERT_TRUE(c.ok());
    pid = c->pid();
    EXPECT_EQ(::kill(pid, 0), 0);
  }
  // Reaped: the pid no longer exists (not even as a zombie).
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(ChildProcessTest, TerminateEscalatesToKill) {
  auto c = ChildProcess::spawn({.argv = {"sh", "-c", "trap '' TERM; sleep 100"}});
  ASSERT_TRUE(c.ok());
  ::usleep(100000);  // let the shell install its trap
  ExitStatus st = c->terminate(200ms);
  EXPECT_FALSE(st.exited);
  EXPECT_EQ(st.signal, SIGKILL);
  EXPECT_FALSE(c->running());
}

TEST(ChildProcessTest, WaitTimesOutWithDeadlineError) {
  auto c = ChildProcess::spawn({.argv = {"sleep", "100"}});
  ASSERT_TRUE(c.ok());
  auto st = c->waitFor(50ms);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Code::kDeadlineExceeded);
}

}  // namespace
}  // namespace vessel
