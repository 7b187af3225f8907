#include "api/data_plane_requests.h"

#include <gtest/gtest.h>

#include <csignal>

namespace vessel::api {
namespace {

TEST(DataPlaneRequestsTest, QueryIsDecodedAndBounded) {
  auto q =
      parseQuery("/v1/files?path=%2Fhome%2Fuser%2Fa+b.txt&recursive=true", {"path", "recursive"});
  ASSERT_TRUE(q.ok()) << q.error().message();
  EXPECT_EQ((*q)["path"], "/home/user/a b.txt");
  EXPECT_EQ((*q)["recursive"], "true");
  EXPECT_FALSE(parseQuery("/v1/files?path=%2", {"path"}).ok());
  EXPECT_FALSE(parseQuery("/v1/files?path=%zz", {"path"}).ok());
  EXPECT_FALSE(parseQuery("/v1/files?colour=red", {"path"}).ok());
  EXPECT_FALSE(parseQuery("/v1/files?path=/a&path=/b", {"path"}).ok());
  EXPECT_FALSE(parseQuery("/v1/files?path=" + std::string(9000, 'a'), {"path"}).ok());
  EXPECT_TRUE(parseQuery("/v1/files", {"path"})->empty());
}

TEST(DataPlaneRequestsTest, GuestPathsAreAbsoluteAndBounded) {
  EXPECT_EQ(guestPath("/tmp/x").value_or(""), "/tmp/x");
  EXPECT_FALSE(guestPath("").ok());
  EXPECT_FALSE(guestPath("tmp/x").ok());
  EXPECT_FALSE(guestPath(std::string("/a\0b", 4)).ok());
  EXPECT_FALSE(guestPath("/" + std::string(5000, 'a')).ok());
  EXPECT_EQ(modeParam("0755").value_or(0), 0755u);
  EXPECT_FALSE(modeParam("0999").ok());
  EXPECT_FALSE(modeParam("17777").ok());
}

TEST(DataPlaneRequestsTest, ExecRequests) {
  auto r = parseExecRequest(
      R"({"cmd":["ls","-l"],"env":{"A":"1"},"cwd":"/tmp","user":"root","timeout_ms":5})");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->spec.argv, (std::vector<std::string>{"ls", "-l"}));
  EXPECT_EQ(r->spec.env, (std::vector<std::string>{"A=1"}));
  EXPECT_EQ(r->spec.cwd, "/tmp");
  EXPECT_EQ(r->spec.user, "root");
  EXPECT_EQ(r->spec.timeout.count(), 5);
  EXPECT_FALSE(r->keep_stdin);
  EXPECT_FALSE(r->spec.pty);
  auto p = parseExecRequest(R"({"shell":"stty size","pty":{"rows":30,"cols":100}})");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->spec.pty);
  EXPECT_TRUE(p->keep_stdin);
  EXPECT_EQ(p->spec.rows, 30);
  EXPECT_EQ(p->spec.cols, 100);
  EXPECT_EQ(parseExecRequest(R"({"cmd":["x"]})")->spec.user, "") << "the template's user";
  for (const char* bad :
       {"", "[]", "{}", R"({"cmd":[]})", R"({"cmd":"ls"})", R"({"cmd":[1]})", R"({"cmd":[""]})",
        R"({"cmd":["a"],"shell":"b"})", R"({"cmd":["a"],"user":"Root;rm"})",
        R"({"cmd":["a"],"cwd":"rel"})", R"({"cmd":["a"],"env":{"1X":"y"}})",
        R"({"cmd":["a"],"pty":{"rows":0}})", R"({"cmd":["a"],"bogus":1})",
        R"({"cmd":["a"],"timeout_ms":-1})", R"({"cmd":["a"],"stdin":"yes"})"})
    EXPECT_FALSE(parseExecRequest(bad).ok()) << bad;
}

TEST(DataPlaneRequestsTest, SignalsResizeMkdirMove) {
  EXPECT_EQ(parseSignalRequest(R"({"signal":"TERM"})").value_or(0), SIGTERM);
  EXPECT_EQ(parseSignalRequest(R"({"signal":"SIGKILL"})").value_or(0), SIGKILL);
  EXPECT_EQ(parseSignalRequest(R"({"signal":2})").value_or(0), 2);
  EXPECT_FALSE(parseSignalRequest(R"({"signal":"NOPE"})").ok());
  EXPECT_FALSE(parseSignalRequest(R"({"signal":99})").ok());
  auto w = parseResizeRequest(R"({"rows":40,"cols":120})");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->rows, 40);
  EXPECT_FALSE(parseResizeRequest(R"({"rows":40})").ok());
  auto m = parseMkdirRequest(R"({"path":"/a/b","mode":"0700","parents":false})");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->mode, 0700u);
  EXPECT_FALSE(m->parents);
  EXPECT_FALSE(parseMkdirRequest(R"({"mode":"0700"})").ok());
  auto mv = parseMoveRequest(R"({"from":"/a","to":"/b"})");
  ASSERT_TRUE(mv.ok());
  EXPECT_EQ(mv->to, "/b");
  EXPECT_FALSE(parseMoveRequest(R"({"from":"/a"})").ok());
  EXPECT_FALSE(parseMoveRequest(R"({"from":"/a","to":"b"})").ok());
  EXPECT_EQ(parsePid("42").value_or(0), 42u);
  EXPECT_FALSE(parsePid("0").ok());
  EXPECT_FALSE(parsePid("4x").ok());
  EXPECT_EQ(watchEventNames(1 | 16), (std::vector<std::string>{"create", "moved_to"}));
}

}  // namespace
}  // namespace vessel::api
