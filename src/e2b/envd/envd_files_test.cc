// envd's files against the real agent run on the host (agentclient's
// HostAgent): /files up and down (multipart, octets, gzip, signed URLs),
// watchers, the filesystem service as E2B's SDK expects it, guest users.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>

#include "e2b/envd/envd_fixture_test.h"
#include "e2b/envd/services.h"
#include "e2b/envd/signature.h"

namespace vessel::e2b::envd {
namespace {

using namespace std::chrono_literals;
using agentclient::testing::runFor;
using fixture::EnvdTest;
using fixture::kRoot;
using fixture::startReq;
using ::testing::HasSubstr;

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
  // A signed URL with no token works where it names its sandbox (by Host).
  std::string sig = fileSignature(path, "read", "root", tokens_.forSandbox("sb-1"), std::nullopt);
  std::string enc;
  for (char c : sig) enc += c == '+' ? "%2B" : c == '/' ? "%2F" : std::string(1, c);
  const std::string named = " HTTP/1.1\r\nHost: 49983-sb-1.vessel.test\r\n";
  auto signed_get =
      runFor(io_,
             request(server_.port(),
                     "GET /files?path=" + path + "&username=root&signature=" + enc + named, ""),
             20s);
  ASSERT_TRUE(signed_get.ok());
  EXPECT_EQ(signed_get->status, 200) << signed_get->body;
  EXPECT_EQ(signed_get->body, "hello world");
  auto bad =
      runFor(io_,
             request(server_.port(),
                     "GET /files?path=" + path + "&username=root&signature=v1_nope" + named, ""),
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
