// Templates from OCI images end to end (issue 26): a real registry on
// 127.0.0.1 (Debian's docker-registry), an image made here from busybox
// with umoci and pushed with skopeo, a real vesseld that pulls, converts
// and boots it. Through the CLI (`vessel template build --from-image`)
// and the API (POST /v1/templates with from_image). No traffic leaves
// the machine. One daemon and one registry for the binary; boots are
// counted in each test's comment.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/base64.h"
#include "base/fd.h"
#include "base/sha256.h"
#include "images/testing/registry.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

using namespace std::chrono_literals;
using images::testing::TestRegistry;
using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::str;
using testing::Vesseld;

Vesseld* d = nullptr;
TestRegistry* reg = nullptr;
std::string image_ref;  // 127.0.0.1:PORT/test/app:1

using testing::CliRun;

// `vessel ARGS...` against the daemon, with nothing else of our environment.
CliRun vessel(const std::vector<std::string>& args) {
  return testing::runCli(VESSEL_PATH, *d, args, {.timeout = std::chrono::seconds(600)});
}

// POST /v1/templates to its end: "done", or "failed: <the operation's error>".
std::string build(const std::string& spec) {
  auto r = d->call("POST", "/v1/templates", spec);
  if (r.status != 202) return "status " + std::to_string(r.status) + ": " + r.body;
  std::string op = str(r.js().at("operation"), "id");
  std::string st = d->finish(op);
  if (st == "done") return st;
  return st + ": " + d->call("GET", "/v1/operations/" + op).body;
}

class ImageTemplateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    auto r = TestRegistry::start();
    ASSERT_TRUE(r.ok()) << r.error().message();
    reg = r->release();
    std::string root = reg->dir() + "/app-root";
    ASSERT_TRUE(images::testing::makeBusyboxRoot(root).ok());
    std::filesystem::create_directories(root + "/srv");
    images::testing::ImageSpec spec;
    spec.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "GREETING=hello from the image"};
    spec.working_dir = "/srv";
    // The image's command: where it ran and as whom, left in a file.
    // Its output, before the snapshot and after, is the sandbox log's "start".
    spec.cmd = {"/bin/sh", "-c",
                "pwd > /tmp/started; id -u >> /tmp/started; echo serving from $(pwd);"
                " echo warming up >&2; sleep 4; echo still here; exec sleep 100000"};
    ASSERT_TRUE(reg->push(root, "test/app", "1", spec).ok());
    images::testing::ImageSpec arm;
    arm.architecture = "arm64";
    ASSERT_TRUE(reg->push(root, "test/arm", "1", arm).ok());
    image_ref = reg->host() + "/test/app:1";
    // A small cap on build contexts, so that one over it is cheap to send.
    d = new Vesseld(VESSELD_PATH, {"--max-build-context-mib", "4"});
    d->setContract(testing::apiContract());
    ASSERT_TRUE(d->start()) << "vesseld did not come up; log:\n" << d->log();
  }
  static void TearDownTestSuite() {
    if (d) testing::endSuite(d);
    delete reg;
    reg = nullptr;
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (vesseld, umoci)";
    ASSERT_TRUE(d && reg && !d->key().empty()) << "set-up failed";
  }
};

// Boots: one build, one create. Then a second build from the same image
// (one more boot) that neither pulls nor converts it again.
TEST_F(ImageTemplateTest, BuildsFromAnImageRunsInItAndCachesIt) {
  CliRun b =
      vessel({"template", "build", "--from-image", image_ref, "--name", "app", "--image-cmd"});
  ASSERT_EQ(b.code, 0) << b.err << "\n" << d->log();
  EXPECT_THAT(b.out, ::testing::StartsWith("app@"));

  std::string why;
  std::string id = d->createSandbox(R"({"template": "app"})", &why);
  ASSERT_FALSE(id.empty()) << why << d->log();
  // The image's files, with the agent added, and the image's Env as defaults.
  EXPECT_EQ(d->sh(id, "cat /etc/passwd | head -1"), "root:x:0:0:root:/root:/bin/sh\n");
  EXPECT_EQ(d->sh(id, "echo \"$GREETING\"", "user"), "hello from the image\n");
  EXPECT_EQ(d->sh(id, "echo $PATH"), "/usr/local/bin:/usr/bin:/bin\n");
  EXPECT_EQ(d->sh(id, "id -u", "user"), "1000\n") << "the build adds Vessel's `user`";
  EXPECT_EQ(d->sh(id, "test -x /sbin/vessel-agent && echo yes"), "yes\n");
  // The image's Cmd ran before the snapshot, as its User (root) in its WorkingDir.
  EXPECT_EQ(d->sh(id, "cat /tmp/started"), "/srv\n0\n");
  // Its output is in the sandbox's log, each line with its stream, the
  // last one written seconds later (after the snapshot, as a rule).
  std::string start_log;
  for (int i = 0; i < 120 && start_log.find("still here") == std::string::npos; ++i) {
    if (i) std::this_thread::sleep_for(500ms);
    start_log = d->call("GET", "/v1/sandboxes/" + id + "/logs?kind=start").body;
  }
  EXPECT_THAT(start_log, HasSubstr(R"("stream":"stdout","line":"serving from /srv")"));
  EXPECT_THAT(start_log, HasSubstr(R"("stream":"stderr","line":"warming up")"));
  EXPECT_THAT(start_log, HasSubstr(R"("stream":"stdout","line":"still here")"));
  EXPECT_EQ(start_log.find("serving from"), start_log.rfind("serving from")) << "logged twice";
  CliRun logs = vessel({"logs", id, "--kind", "start"});
  EXPECT_EQ(logs.code, 0) << logs.err;
  EXPECT_THAT(logs.out, HasSubstr(" start     stderr: warming up"));
  EXPECT_THAT(d->sh(id, "ps"), HasSubstr("sleep 100000"));
  EXPECT_TRUE(d->deleteSandbox(id));

  auto layers = reg->layers("test/app", "1");
  ASSERT_TRUE(layers.ok() && layers->size() == 1);
  EXPECT_EQ(reg->blobFetches("test/app", (*layers)[0]), 1u);
  // Another template from the same image, through the API: the converted
  // image comes from the cache (the registry is asked for the manifest
  // only, never for the layer again).
  EXPECT_EQ(build(R"({"name": "app2", "from_image": ")" + image_ref +
                  R"(", "env": {"GREETING": "from the spec"}})"),
            "done");
  EXPECT_EQ(reg->blobFetches("test/app", (*layers)[0]), 1u) << "pulled again";
  std::string id2 = d->createSandbox(R"({"template": "app2"})", &why);
  ASSERT_FALSE(id2.empty()) << why;
  EXPECT_EQ(d->sh(id2, "echo \"$GREETING\"", "user"), "from the spec\n") << "the spec's env wins";
  EXPECT_EQ(d->sh(id2, "cat /tmp/started 2>/dev/null || echo none"), "none\n")
      << "no image_cmd: the image's command does not run";
  EXPECT_TRUE(d->deleteSandbox(id2));
}

// No boots: each is refused before a VM starts, with the reason.
TEST_F(ImageTemplateTest, RefusesWhatItCannotBuild) {
  auto bad = d->call("POST", "/v1/templates", R"({"name": "x", "from_image": "Not A Ref"})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_THAT(bad.body, HasSubstr("image reference"));
  auto both =
      d->call("POST", "/v1/templates", R"({"name": "x", "from_image": "a", "base": "minimal"})");
  EXPECT_EQ(both.status, 400) << both.body;

  std::string arm = build(R"({"name": "arm", "from_image": ")" + reg->host() + R"(/test/arm:1"})");
  EXPECT_THAT(arm, HasSubstr("failed"));
  EXPECT_THAT(arm, HasSubstr("linux/arm64, not linux/amd64"));
  std::string missing =
      build(R"({"name": "nope", "from_image": ")" + reg->host() + R"(/test/nothing:1"})");
  EXPECT_THAT(missing, HasSubstr("failed"));
  EXPECT_THAT(missing, HasSubstr("not found"));
  std::string down = build(R"({"name": "down", "from_image": "127.0.0.1:1/test/app:1"})");
  EXPECT_THAT(down, HasSubstr("failed"));
  EXPECT_THAT(down, HasSubstr("cannot be reached"));
  EXPECT_THAT(down, HasSubstr("connection refused")) << "skopeo's own words";

  // The CLI says the same and exits non-zero.
  CliRun c =
      vessel({"template", "build", "--from-image", reg->host() + "/test/arm:1", "--name", "arm2"});
  EXPECT_EQ(c.code, 1) << c.out;
  EXPECT_THAT(c.err, HasSubstr("arm64"));
  CliRun none = vessel({"template", "build", "--name", "x"});
  EXPECT_NE(none.code, 0);
}

// Builds run side by side up to --max-concurrent-builds (2 by default),
// but never two of one template: the second waits and finds the first's
// result. Seen in the order of the operations' events. Boots: three builds
// (two at once, then one) and no create.
TEST_F(ImageTemplateTest, BuildsRunSideBySideButNeverTwoOfOneTemplate) {
  auto begin = [&](const std::string& name) {
    auto r =
        d->call("POST", "/v1/templates", R"({"name": ")" + name + R"(", "commands": ["sleep 2"]})");
    EXPECT_EQ(r.status, 202) << r.body;
    return r.status == 202 ? str(r.js().at("operation"), "id") : std::string();
  };
  // Event ids of an operation's first template.progress and of its end.
  auto span = [&](const std::string& op) {
    auto r = d->call("GET", "/v1/operations/" + op + "/events");
    std::pair<int64_t, int64_t> s{-1, -1};
    for (const auto& e : testing::parseSse(r.body)) {
      if (e.type == "template.progress" && s.first < 0) s.first = e.id;
      if (e.type == "operation.done") s.second = e.id;
    }
    return s;
  };
  std::string nonce = std::to_string(::getpid());
  std::string a = begin("side-a-" + nonce), b = begin("side-b-" + nonce),
              a2 = begin("side-a-" + nonce);
  ASSERT_FALSE(a.empty() || b.empty() || a2.empty());
  for (const auto& op : {a, b, a2}) ASSERT_EQ(d->finish(op), "done");
  auto sa = span(a), sb = span(b), sa2 = span(a2);
  ASSERT_TRUE(sa.first > 0 && sa.second > 0 && sb.first > 0 && sb.second > 0 && sa2.first > 0);
  EXPECT_LT(sb.first, sa.second) << "b waited for a: the builds did not overlap";
  EXPECT_LT(sa.first, sb.second);
  EXPECT_GT(sa2.first, sa.second) << "two builds of one template ran at once";
  auto again = d->call("GET", "/v1/operations/" + a2 + "/events");
  EXPECT_THAT(again.body, HasSubstr(R"("step":"cached")")) << "the second found the first's result";
}

// A registry behind a password (docs/templates.md, "Private registries").
// Boots: one build, one create; every refusal comes before a VM starts.
TEST_F(ImageTemplateTest, APrivateImageNeedsItsTenantsCredential) {
  auto r = TestRegistry::start({"alice", "s3cret-registry-pass"});
  ASSERT_TRUE(r.ok()) << r.error().message();
  std::unique_ptr<TestRegistry> priv = std::move(*r);
  std::string root = priv->dir() + "/root";
  ASSERT_TRUE(images::testing::makeBusyboxRoot(root).ok());
  std::ofstream(root + "/private.txt") << "only with the password\n";
  auto digest = priv->push(root, "test/private", "1");
  ASSERT_TRUE(digest.ok()) << digest.error().message();
  std::string ref = priv->host() + "/test/private:1";
  auto credential = [&](const std::string& name, const std::string& host,
                        const std::string& userpass) {
    return d->call("POST", "/v1/credentials",
                   R"({"name": ")" + name + R"(", "hosts": [")" + host +
                       R"("], "header": "Authorization", "value": "Basic )" +
                       base64Encode(userpass) + R"("})");
  };

  std::string anon = build(R"({"name": "priv0", "from_image": ")" + ref + R"("})");
  EXPECT_THAT(anon, HasSubstr("failed"));
  EXPECT_THAT(anon, HasSubstr("refused an anonymous pull"));

  ASSERT_EQ(credential("lanreg", "localhost", "alice:wrong-password-123").status, 201);
  std::string wrong = build(R"({"name": "priv0", "from_image": ")" + ref +
                            R"(", "from_image_credential": "lanreg"})");
  EXPECT_THAT(wrong, HasSubstr("refused the credential's username and password"));
  EXPECT_THAT(wrong, ::testing::Not(HasSubstr("wrong-password"))) << "a secret in an error";

  // A credential for another host is never sent to this registry; a
  // missing one is named.
  ASSERT_EQ(credential("elsewhere", "registry.example.com", "alice:s3cret-registry-pass").status,
            201);
  auto other = d->call(
      "POST", "/v1/templates",
      R"({"name": "priv0", "from_image": ")" + ref + R"(", "from_image_credential": "elsewhere"})");
  EXPECT_EQ(other.status, 400) << other.body;
  EXPECT_THAT(other.body, HasSubstr("not the image's registry localhost"));
  auto missing = d->call(
      "POST", "/v1/templates",
      R"({"name": "priv0", "from_image": ")" + ref + R"(", "from_image_credential": "nope"})");
  EXPECT_EQ(missing.status, 404) << missing.body;

  ASSERT_EQ(credential("lanreg", "localhost", "alice:s3cret-registry-pass").status, 201);
  CliRun b = vessel({"template", "build", "--from-image", ref, "--name", "private",
                     "--registry-credential", "lanreg"});
  ASSERT_EQ(b.code, 0) << b.err << "\n" << d->log();
  std::string why;
  std::string id = d->createSandbox(R"({"template": "private"})", &why);
  ASSERT_FALSE(id.empty()) << why;
  EXPECT_EQ(d->sh(id, "cat /private.txt"), "only with the password\n");
  EXPECT_TRUE(d->deleteSandbox(id));

  // What the credential pulled serves no pull without it, even by digest
  // (which otherwise never asks the registry): another tenant pulls anonymously.
  std::string by_digest = build(R"({"name": "priv1", "from_image": ")" + priv->host() +
                                "/test/private@" + *digest + R"("})");
  EXPECT_THAT(by_digest, HasSubstr("refused an anonymous pull"));
  EXPECT_THAT(d->log(), ::testing::Not(HasSubstr("s3cret-registry-pass")));
}

// A Dockerfile using every instruction Vessel supports, on the registry's
// image, through the CLI (the context read by the CLI, sent in the spec).
// Boots: one build, one create.
TEST_F(ImageTemplateTest, BuildsFromADockerfileWithEveryInstruction) {
  ScratchDir ctx;
  const std::string& c = ctx.path();
  auto put = [&](const std::string& rel, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(c + "/" + rel).parent_path());
    std::ofstream(c + "/" + rel) << text;
  };
  put("run.sh", "#!/bin/sh\necho run\n");
  std::filesystem::permissions(c + "/run.sh", std::filesystem::perms(0755));
  put("conf/a.conf", "setting=1\n");
  put("conf/secret.key", "never copied\n");
  put("bundle/x.txt", "from the tar\n");
  ASSERT_EQ(std::system(("tar -cf " + c + "/bundle.tar -C " + c + " bundle").c_str()), 0);
  put(".dockerignore", "conf/*.key\nbundle\n");
  // clang-format off
  // Its own delimiter: the text holds `)"`.
  put("Dockerfile", R"DF(# syntax=docker/dockerfile:1
ARG TAG=1
FROM )DF" + reg->host() + R"DF(/test/app:${TAG}
ARG WHO=nobody
ENV APP=/srv/app GREETING="hello from the Dockerfile"
WORKDIR $APP
COPY --chown=1000:1000 run.sh ./
COPY conf/ /etc/app/
ADD bundle.tar /opt/
RUN echo "built by $WHO in $(pwd)" > built.txt && \
    id -u >> built.txt
RUN ["/bin/sh", "-c", "test -x run.sh && echo exec-form >> built.txt"]
RUN mkdir -p /w && chown 4242 /w
USER 4242
WORKDIR /w
EXPOSE 8080
CMD ["/bin/sh", "-c", "id -u > cmd.txt; pwd >> cmd.txt; exec sleep 100000"]
)DF");
  // clang-format on
  CliRun b = vessel({"template", "build", "-f", c + "/Dockerfile", "--name", "dockerfile",
                     "--build-arg", "WHO=tester"});
  ASSERT_EQ(b.code, 0) << b.err << "\n" << d->log();
  EXPECT_THAT(b.out, ::testing::StartsWith("dockerfile@"));
  // Its log, as `docker build --progress=plain` prints one: the steps
  // numbered, each with its line, its output and its time.
  EXPECT_THAT(b.err, HasSubstr("] RUN echo \"built by $WHO"));
  EXPECT_THAT(b.err, ::testing::ContainsRegex("#[0-9]+ \\[line 12\\] RUN \\[\"/bin/sh\""));
  EXPECT_THAT(b.err, ::testing::ContainsRegex("#[0-9]+ DONE [0-9]+\\.[0-9]s"));

  std::string why;
  std::string id = d->createSandbox(R"({"template": "dockerfile"})", &why);
  ASSERT_FALSE(id.empty()) << why << d->log();
  EXPECT_EQ(d->sh(id, "cat /srv/app/built.txt"), "built by tester in /srv/app\n0\nexec-form\n");
  EXPECT_EQ(d->sh(id, "stat -c '%u %g %a' /srv/app/run.sh"), "1000 1000 755\n");
  EXPECT_EQ(d->sh(id, "cat /etc/app/a.conf"), "setting=1\n");
  EXPECT_EQ(d->sh(id, "test -e /etc/app/secret.key && echo copied || echo excluded"), "excluded\n");
  EXPECT_EQ(d->sh(id, "cat /opt/bundle/x.txt"), "from the tar\n") << "ADD unpacks a local tar";
  EXPECT_EQ(d->sh(id, "echo \"$GREETING\"", "user"), "hello from the Dockerfile\n");
  // CMD ran before the snapshot as the last USER in the last WORKDIR.
  EXPECT_EQ(d->sh(id, "cat /w/cmd.txt"), "4242\n/w\n");
  EXPECT_THAT(d->sh(id, "ps"), HasSubstr("sleep 100000"));
  EXPECT_TRUE(d->deleteSandbox(id));
}

// The step cache (docs/templates.md, "The build cache"). Boots: four
// builds (cold, a COPY's file changed, the last line changed, --no-cache)
// and a create after each. A RUN leaves a random stamp: a step that came
// from the cache keeps the stamp of the build that ran it.
TEST_F(ImageTemplateTest, ARebuildRunsOnlyWhatChangedAndNoCacheRunsAll) {
  ScratchDir ctx;
  const std::string& c = ctx.path();
  // A nonce in the first step: this build is cold whatever ran before.
  std::string nonce = std::to_string(::getpid()) + "-" +
                      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  auto dockerfile = [&](const std::string& last) {
    std::ofstream(c + "/Dockerfile")
        << "FROM vessel://minimal\n"
        << "RUN echo " << nonce << " > /nonce && head -c 16 /dev/urandom | md5sum > /stamp\n"
        << "COPY a.txt /a.txt\n"
        << "# a comment moves nothing\n"
        << "RUN echo " << last << " > /last\n";
  };
  struct Built {
    CliRun run;
    std::string stamp, a, last;
  };
  auto buildAndLook = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"template",        "build",  "-f",
                                     c + "/Dockerfile", "--name", "stepcache"};
    args.insert(args.end(), extra.begin(), extra.end());
    Built b{vessel(args), "", "", ""};
    if (b.run.code != 0) return b;
    std::string why;
    std::string id = d->createSandbox(R"({"template": "stepcache"})", &why);
    EXPECT_FALSE(id.empty()) << why;
    if (id.empty()) return b;
    b.stamp = d->sh(id, "cat /stamp");
    b.a = d->sh(id, "cat /a.txt");
    b.last = d->sh(id, "cat /last");
    EXPECT_TRUE(d->deleteSandbox(id));
    return b;
  };

  std::ofstream(c + "/a.txt") << "A1\n";
  dockerfile("one");
  Built cold = buildAndLook({});
  ASSERT_EQ(cold.run.code, 0) << cold.run.err << d->log();
  EXPECT_THAT(cold.run.err, ::testing::Not(HasSubstr("CACHED")));
  ASSERT_FALSE(cold.stamp.empty());
  EXPECT_EQ(cold.last, "one\n");

  // A COPY's file changed: the RUN before it comes from the cache, the
  // COPY and everything after run again.
  std::ofstream(c + "/a.txt") << "A2\n";
  Built copied = buildAndLook({});
  ASSERT_EQ(copied.run.code, 0) << copied.run.err;
  EXPECT_THAT(copied.run.err, HasSubstr("#1 CACHED"));
  EXPECT_THAT(copied.run.err, ::testing::Not(HasSubstr("#2 CACHED")));
  EXPECT_THAT(copied.run.err, ::testing::Not(HasSubstr("#3 CACHED")));
  EXPECT_EQ(copied.stamp, cold.stamp) << "the cached RUN did not run again";
  EXPECT_EQ(copied.a, "A2\n");

  // The last line changed: only it runs.
  dockerfile("two");
  Built last = buildAndLook({});
  ASSERT_EQ(last.run.code, 0) << last.run.err;
  EXPECT_THAT(last.run.err, HasSubstr("#1 CACHED"));
  EXPECT_THAT(last.run.err, HasSubstr("#2 CACHED"));
  EXPECT_THAT(last.run.err, ::testing::ContainsRegex("#3 DONE [0-9]+\\.[0-9]s"));
  EXPECT_EQ(last.stamp, cold.stamp);
  EXPECT_EQ(last.a, "A2\n");
  EXPECT_EQ(last.last, "two\n");

  // --no-cache: every step again, and a new version of the same spec.
  Built forced = buildAndLook({"--no-cache"});
  ASSERT_EQ(forced.run.code, 0) << forced.run.err;
  EXPECT_THAT(forced.run.err, ::testing::Not(HasSubstr("CACHED")));
  EXPECT_NE(forced.stamp, cold.stamp) << "--no-cache reused the first RUN";
  EXPECT_EQ(forced.last, "two\n");
  EXPECT_NE(forced.run.out, last.run.out) << "the same version: " << forced.run.out;
}

// POST /v1/templates:dockerfile: the context as a streamed tar, past the
// 600 KiB an inline spec held, with the Dockerfile outside the context;
// one over the daemon's 4 MiB cap (declared, chunked, from the CLI), a bad
// tar, a bad Dockerfile and a missing one refused before any VM starts.
// Boots: one build, one create.
TEST_F(ImageTemplateTest, ADockerfileContextTravelsAsATarWithinTheCap) {
  ScratchDir scratch;
  const std::string c = scratch.path() + "/ctx";
  std::filesystem::create_directories(c + "/sub");
  std::string big;
  big.reserve(2 << 20);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  while (big.size() < (2u << 20)) {  // 2 MiB that do not compress
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    big.append(reinterpret_cast<const char*>(&x), sizeof x);
  }
  std::ofstream(c + "/sub/big.bin", std::ios::binary) << big;
  std::ofstream(c + "/.dockerignore") << "*.log\n";
  std::ofstream(c + "/skip.log") << "never sent\n";
  std::string df = scratch.path() + "/Dockerfile";  // outside the context
  std::ofstream(df) << "FROM vessel://minimal\nCOPY . /ctx/\n";
  CliRun b = vessel({"template", "build", "-f", df, "--context", c, "--name", "bigctx"});
  ASSERT_EQ(b.code, 0) << b.err << "\n" << d->log();
  std::string why;
  std::string id = d->createSandbox(R"({"template": "bigctx"})", &why);
  ASSERT_FALSE(id.empty()) << why << d->log();
  EXPECT_EQ(d->sh(id, "sha256sum /ctx/sub/big.bin | cut -d' ' -f1"), sha256Hex(big) + "\n");
  EXPECT_EQ(d->sh(id, "ls -A /ctx | tr '\\n' ' '"), ".dockerignore sub ")
      << "neither the excluded file nor the Dockerfile from outside";
  EXPECT_TRUE(d->deleteSandbox(id));
  for (const auto& e : std::filesystem::directory_iterator(d->stateDir() + "/build-contexts"))
    ADD_FAILURE() << "left behind: " << e.path();

  // Over the cap: 413 naming it, whether the length is declared or not.
  auto upload = [&](const std::string& query, const std::string& body, bool chunked) {
    testing::Request r;
    r.method = "POST";
    r.target = "/v1/templates:dockerfile?" + query;
    r.bearer = d->key();
    r.json = false;
    r.chunked = chunked;
    r.headers = {"Content-Type: application/x-tar"};
    r.body = body;
    auto s = testing::HttpStream::open(d->port(), r);
    if (!s) return testing::Reply{};
    s->readAll();
    return s->reply();
  };
  std::string over(5 << 20, 'x');
  for (bool chunked : {false, true}) {
    auto r = upload("name=huge", over, chunked);
    EXPECT_EQ(r.status, 413) << chunked << r.body;
    EXPECT_THAT(r.body, HasSubstr("larger than the 4 MiB this server takes"));
    EXPECT_THAT(r.body, HasSubstr("--max-build-context-mib"));
  }
  std::ofstream(c + "/sub/more.bin", std::ios::binary) << over;
  CliRun o = vessel({"template", "build", "-f", df, "--context", c, "--name", "huge"});
  EXPECT_EQ(o.code, 1);
  EXPECT_THAT(o.err, HasSubstr("larger than the 4 MiB"));

  // A bad tar, a Dockerfile that does not parse (its line named), none.
  auto bad = upload("name=bad", std::string(4096, 'j'), false);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_THAT(bad.body, HasSubstr("not a tar"));
  std::string t = scratch.path() + "/t";
  std::filesystem::create_directories(t);
  std::ofstream(t + "/Dockerfile") << "FROM vessel://minimal\nHEALTHCHECK CMD true\n";
  ASSERT_EQ(std::system(("tar -cf " + t + ".tar -C " + t + " .").c_str()), 0);
  auto tar = readFile(t + ".tar");
  ASSERT_TRUE(tar.ok());
  auto parse = upload("name=hc", *tar, true);
  EXPECT_EQ(parse.status, 400) << parse.body;
  EXPECT_THAT(parse.body, HasSubstr("line 2: HEALTHCHECK is not supported"));
  auto none = upload("name=none&dockerfile=ci%2FDockerfile", *tar, false);
  EXPECT_EQ(none.status, 400) << none.body;
  EXPECT_THAT(none.body, HasSubstr("no ci/Dockerfile in the build context"));
}

// Boots: one build that fails at its third line. Then two refused before
// any VM starts.
TEST_F(ImageTemplateTest, ADockerfileThatFailsNamesItsLine) {
  ScratchDir ctx;
  std::string df = ctx.path() + "/Dockerfile";
  std::ofstream(df) << "FROM vessel://minimal\nRUN echo before\nRUN echo to-stdout; exit 7\n"
                       "RUN echo never\n";
  CliRun b = vessel({"template", "build", "-f", df, "--name", "failing"});
  EXPECT_EQ(b.code, 1) << b.out;
  EXPECT_THAT(b.err, HasSubstr("line 3"));
  EXPECT_THAT(b.err, HasSubstr("exit 7"));
  EXPECT_THAT(b.err, HasSubstr("to-stdout"));
  EXPECT_THAT(b.err, HasSubstr("#1 before\n")) << "the first step's output, logged as it ran";
  EXPECT_THAT(b.err, HasSubstr("#2 to-stdout\n"));
  EXPECT_THAT(b.err, ::testing::Not(HasSubstr("never")));

  std::ofstream(df) << "FROM vessel://minimal\nHEALTHCHECK CMD true\n";
  CliRun h = vessel({"template", "build", "-f", df, "--name", "hc"});
  EXPECT_NE(h.code, 0);
  EXPECT_THAT(h.err, HasSubstr("line 2: HEALTHCHECK is not supported"));
  std::ofstream(df) << "FROM vessel://minimal\nCOPY ../outside /x\n";
  CliRun o = vessel({"template", "build", "-f", df, "--name", "out"});
  EXPECT_NE(o.code, 0);
  EXPECT_THAT(o.err, HasSubstr("outside the build context"));
}

}  // namespace
}  // namespace vessel
