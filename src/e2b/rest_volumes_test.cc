// E2B's Volume API routes over HTTP (rest_volumes.cc, rest_volume_files.cc)
// on volumes kept in plain directories (e2b::Volumes as a fake, the real
// volumes::VolumeFiles beneath each): the shapes the SDK reads, the
// volume's token as the only key to its files, E2B's status codes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <thread>

#include "base/clock.h"
#include "e2b/access_token.h"
#include "e2b/rest.h"
#include "ops/lifecycle.h"
#include "ops/testing/fake_node.h"
#include "store/store.h"
#include "templates/store.h"

namespace vessel::e2b {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using tcp = asio::ip::tcp;

constexpr const char* kKey = "e2b_volumes_test_key";

class RestVolumesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/e2b-volumes-" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/templates");
    auto s = store::openSqlite(dir_ + "/vessel.db", &clock_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    templates_ = std::make_unique<templates::TemplateStore>(dir_ + "/templates", "q", "k");
    node_ = std::make_unique<ops::testing::FakeNode>(io_);
    lc_ = std::make_unique<ops::Lifecycle>(io_, *store_, *node_, *templates_, clock_);
    rest_ = std::make_unique<RestApi>(
        *lc_,
        [](std::string_view key) -> Result<std::string> {
          if (key == kKey) return std::string("t1");
          return Error(Code::kUnauthenticated, "unknown key");
        },
        *templates_, tokens_);
    rest_->setVolumes(fakeVolumes());
    rest_->install(server_);
    ASSERT_TRUE(server_.listen({"127.0.0.1", 0}).ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    asio::post(io_, [this] { server_.close(); });
    io_.stop();
    thread_.join();
    pool_.join();
    rest_.reset();
    lc_.reset();
    fs::remove_all(dir_);
  }

  // Volumes in directories under dir_/vols, all of tenant t1 (the records
  // touched on the io thread only). "busy" is mounted: its delete is refused.
  Volumes fakeVolumes() {
    Volumes v;
    v.create = [this](std::string tenant,
                      std::string name) -> asio::awaitable<Result<store::VolumeRecord>> {
      for (const auto& r : records_)
        if (r.name == name) co_return Error(Code::kAlreadyExists, "volume " + name + " exists");
      store::VolumeRecord r;
      r.id = "vol-" + std::to_string(1000 + records_.size());
      r.tenant_id = tenant;
      r.name = name;
      fs::create_directories(dir_ + "/vols/" + r.id);
      records_.push_back(r);
      co_return r;
    };
    v.list = [this](const std::string& tenant) -> Result<std::vector<store::VolumeRecord>> {
      std::vector<store::VolumeRecord> out;
      for (const auto& r : records_)
        if (r.tenant_id == tenant) out.push_back(r);
      return out;
    };
    v.remove = [this](std::string, std::string name) -> asio::awaitable<Status> {
      if (name == "busy") co_return Error(Code::kFailedPrecondition, "volume busy is mounted");
      std::erase_if(records_, [&](const store::VolumeRecord& r) { return r.name == name; });
      co_return okStatus();
    };
    v.files = [this](const std::string&, const std::string& name) -> Result<volumes::VolumeFiles> {
      for (const auto& r : records_)
        if (r.name == name) return volumes::VolumeFiles::open(dir_ + "/vols/" + r.id, false);
      return Error(Code::kNotFound, "no volume " + name);
    };
    v.pool = &pool_;
    v.max_file_bytes = 1 << 20;
    return v;
  }

  struct Answer {
    int status;
    std::string body;
  };
  Answer call(http::verb method, const std::string& target, const std::string& auth = "",
              const std::string& body = "", bool key = false) {
    asio::io_context cio;
    tcp::socket s(cio);
    s.connect({asio::ip::make_address("127.0.0.1"), server_.port()});
    http::Request req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (key) req.set("X-API-Key", kKey);
    if (!auth.empty()) req.set(http::field::authorization, "Bearer " + auth);
    req.body() = body;
    req.prepare_payload();
    http::write(s, req);
    boost::beast::flat_buffer b;
    http::Response res;
    http::read(s, b, res);
    return {res.result_int(), res.body()};
  }
  // POST /volumes: its id and token.
  std::pair<std::string, std::string> create(const std::string& name) {
    auto a = call(http::verb::post, "/volumes", "", R"({"name":")" + name + "\"}", true);
    EXPECT_EQ(a.status, 201) << a.body;
    auto o = json::parse(a.body).as_object();
    return {std::string(o.at("volumeID").as_string()), std::string(o.at("token").as_string())};
  }

  std::string dir_;
  FakeWallClock clock_;
  asio::io_context io_;
  asio::thread_pool pool_{1};
  std::vector<store::VolumeRecord> records_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<templates::TemplateStore> templates_;
  std::unique_ptr<ops::testing::FakeNode> node_;
  std::unique_ptr<ops::Lifecycle> lc_;
  AccessTokens tokens_ = AccessTokens::withKey(std::string(32, 'k'));
  std::unique_ptr<RestApi> rest_;
  http::HttpServer server_{io_};
  std::thread thread_;
};

TEST_F(RestVolumesTest, VolumesAndTheirTokensBehindTheKey) {
  auto [id, token] = create("data");
  EXPECT_EQ(token, tokens_.forVolume("t1", id));
  auto list = call(http::verb::get, "/volumes", "", "", true);
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(json::parse(list.body), json::parse(R"([{"volumeID":")" + id + R"(","name":"data"}])"));
  auto got = call(http::verb::get, "/volumes/" + id, "", "", true);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(json::parse(got.body).at("token").as_string(), token);
  EXPECT_EQ(call(http::verb::post, "/volumes", "", R"({"name":"data"})", true).status, 409);
  EXPECT_EQ(call(http::verb::post, "/volumes", "", R"({"name":"Data"})", true).status, 400);
  EXPECT_EQ(call(http::verb::get, "/volumes/vol-999999").status, 401);  // no key
  EXPECT_EQ(call(http::verb::get, "/volumes", token).status, 401);      // a token is no key
  auto missing = call(http::verb::get, "/volumes/vol-999999", "", "", true);
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(json::parse(missing.body).at("code").as_int64(), 404);
  EXPECT_EQ(call(http::verb::get, "/volumes/not-a-volume", "", "", true).status, 404);
  create("busy");
  auto busy = call(http::verb::get, "/volumes", "", "", true);
  std::string busy_id(json::parse(busy.body).as_array().at(1).at("volumeID").as_string());
  EXPECT_EQ(call(http::verb::delete_, "/volumes/" + busy_id, "", "", true).status, 409);
  EXPECT_EQ(call(http::verb::delete_, "/volumes/" + id, "", "", true).status, 204);
  EXPECT_EQ(call(http::verb::delete_, "/volumes/" + id, "", "", true).status, 404);
}

TEST_F(RestVolumesTest, ContentNeedsThatVolumesToken) {
  auto [a, ta] = create("a");
  auto [b, tb] = create("b");
  const std::string put = "/file?path=%2Fsecret";
  ASSERT_EQ(call(http::verb::put, "/volumecontent/" + b + put, tb, "of b").status, 201);
  EXPECT_EQ(call(http::verb::get, "/volumecontent/" + b + "/file?path=/secret", ta).status, 401);
  EXPECT_EQ(call(http::verb::put, "/volumecontent/" + b + put + "&force=true", ta, "x").status,
            401);
  EXPECT_EQ(call(http::verb::get, "/volumecontent/" + b + "/path?path=/secret").status, 401);
  EXPECT_EQ(call(http::verb::get, "/volumecontent/" + b + "/path?path=/secret", kKey).status, 401);
  auto other = AccessTokens::withKey(std::string(32, 'z')).forVolume("t1", b);
  EXPECT_EQ(call(http::verb::get, "/volumecontent/" + b + "/path?path=/secret", other).status, 401);
  auto mine = call(http::verb::get, "/volumecontent/" + b + "/file?path=/secret", tb);
  EXPECT_EQ(mine.status, 200);
  EXPECT_EQ(mine.body, "of b");
}

TEST_F(RestVolumesTest, FilesDirectoriesAndMetadata) {
  auto [id, t] = create("files");
  const std::string base = "/volumecontent/" + id;
  EXPECT_EQ(call(http::verb::put, base + "/file?path=/d/x", t, "x").status, 404);
  auto dir = call(http::verb::post, base + "/dir?path=/d/e&force=true&mode=488", t);
  ASSERT_EQ(dir.status, 201) << dir.body;
  auto d = json::parse(dir.body).as_object();
  EXPECT_EQ(d.at("type").as_string(), "directory");
  EXPECT_EQ(d.at("path").as_string(), "/d/e");
  EXPECT_EQ(d.at("mode").as_int64(), 0750);
  for (const char* k : {"atime", "mtime", "ctime", "uid", "gid", "size", "name"})
    EXPECT_TRUE(d.contains(k)) << k;
  EXPECT_EQ(call(http::verb::post, base + "/dir?path=/d", t).status, 409);
  EXPECT_EQ(call(http::verb::post, base + "/dir?path=/d&force=true", t).status, 201);
  EXPECT_EQ(call(http::verb::post, base + "/dir?path=/n/m", t).status, 404);

  auto w = call(http::verb::put, base + "/file?path=/d/f.txt&mode=384", t, "hello");
  ASSERT_EQ(w.status, 201) << w.body;
  EXPECT_EQ(json::parse(w.body).at("size").as_int64(), 5);
  EXPECT_EQ(json::parse(w.body).at("mode").as_int64(), 0600);
  EXPECT_EQ(call(http::verb::put, base + "/file?path=/d/f.txt", t, "again").status, 409);
  EXPECT_EQ(call(http::verb::get, base + "/file?path=/d/f.txt", t).body, "hello");
  EXPECT_EQ(call(http::verb::put, base + "/file?path=/d/f.txt&force=true", t, "again").status, 201);
  EXPECT_EQ(call(http::verb::get, base + "/file?path=/d/f.txt", t).body, "again");

  auto deep = call(http::verb::get, base + "/dir?path=/&depth=3", t);
  ASSERT_EQ(deep.status, 200) << deep.body;
  std::vector<std::string> paths;
  const json::value listing = json::parse(deep.body);
  for (const auto& e : listing.as_array()) paths.emplace_back(e.at("path").as_string());
  EXPECT_EQ(paths, (std::vector<std::string>{"/d", "/d/e", "/d/f.txt"}));
  auto shallow = call(http::verb::get, base + "/dir?path=/", t);
  EXPECT_EQ(json::parse(shallow.body).as_array().size(), 1u);
  EXPECT_EQ(call(http::verb::get, base + "/dir?path=/d/f.txt", t).status, 400);
  EXPECT_EQ(call(http::verb::get, base + "/dir?path=/&depth=0", t).status, 400);
  EXPECT_EQ(call(http::verb::get, base + "/dir", t).status, 400);

  auto st = call(http::verb::get, base + "/path?path=/d/f.txt", t);
  ASSERT_EQ(st.status, 200);
  EXPECT_EQ(json::parse(st.body).at("type").as_string(), "file");
  auto patched = call(http::verb::patch, base + "/path?path=/d/f.txt", t, R"({"mode":420})");
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(json::parse(patched.body).at("mode").as_int64(), 0644);
  EXPECT_EQ(call(http::verb::patch, base + "/path?path=/d/f.txt", t, R"({"mode":70000})").status,
            400);
  EXPECT_EQ(call(http::verb::patch, base + "/path?path=/none", t, R"({"mode":420})").status, 404);
  EXPECT_EQ(call(http::verb::get, base + "/file?path=/../../x", t).status, 400);

  EXPECT_EQ(call(http::verb::delete_, base + "/path?path=/d", t).status, 204);
  auto gone = call(http::verb::get, base + "/path?path=/d", t);
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(json::parse(gone.body).at("code").as_int64(), 404);
  EXPECT_EQ(call(http::verb::delete_, base + "/path?path=/d", t).status, 404);
}

}  // namespace
}  // namespace vessel::e2b
