#include "images/testing/registry.h"

#include <arpa/inet.h>
#include <crypt.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <thread>

#include "base/fd.h"
#include "base/sha256.h"
#include "images/image_config.h"
#include "os/command.h"

namespace vessel::images::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

Result<uint16_t> freePort() {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  // SAFETY: sockaddr_in is the sockaddr the kernel expects for AF_INET.
  if (!s || ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return Error::fromErrno("bind a free port");
  return ntohs(a.sin_port);
}

bool answers(uint16_t port) {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // SAFETY: as above.
  return s && ::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
}

Status run(const std::vector<std::string>& argv) {
  auto r = os::runCommand(argv, {}, std::chrono::minutes(2));
  if (!r.ok()) return std::move(r).error();
  return okStatus();
}

// An htpasswd line with a bcrypt hash (the only kind docker-registry
// takes), made with libcrypt.
Result<std::string> htpasswdLine(const std::string& user, const std::string& password) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (!::crypt_gensalt_rn("$2b$", 5, nullptr, 0, salt, sizeof salt))
    return Error::fromErrno("crypt_gensalt (bcrypt)");
  crypt_data data{};
  const char* hash = ::crypt_r(password.c_str(), salt, &data);
  if (!hash || hash[0] == '*') return Error::fromErrno("crypt (bcrypt)");
  return user + ":" + hash + "\n";
}

}  // namespace

std::vector<std::string> TestRegistry::creds(const std::string& prefix) const {
  if (opts_.username.empty()) return {};
  return {"--" + prefix + (prefix.empty() ? "" : "-") + "creds",
          opts_.username + ":" + opts_.password};
}

Result<std::unique_ptr<TestRegistry>> TestRegistry::start(const RegistryOptions& o) {
  for (const char* tool : {"/usr/bin/docker-registry", "/usr/bin/skopeo", "/usr/bin/umoci"})
    if (::access(tool, X_OK) != 0)
      return Error(
          Code::kFailedPrecondition,
          std::string(tool) + " is missing (apt-get install docker-registry skopeo umoci)");
  std::unique_ptr<TestRegistry> r(new TestRegistry());
  char tmpl[] = "/tmp/vessel-registry-XXXXXX";
  if (!::mkdtemp(tmpl)) return Error::fromErrno("mkdtemp");
  r->dir_ = tmpl;
  VESSEL_ASSIGN_OR_RETURN(uint16_t port, freePort());
  // "localhost", not 127.0.0.1: a credential names a host name (an IP
  // literal is no name), and localhost is loopback for plain HTTP too.
  r->host_ = (o.username.empty() ? "127.0.0.1:" : "localhost:") + std::to_string(port);
  r->opts_ = o;
  std::string auth;
  if (!o.username.empty()) {
    VESSEL_ASSIGN_OR_RETURN(std::string line, htpasswdLine(o.username, o.password));
    VESSEL_TRY(writeFileAtomic(r->dir_ + "/htpasswd", line));
    auth = "auth:\n  htpasswd:\n    realm: vessel-test\n    path: " + r->dir_ + "/htpasswd\n";
  }
  VESSEL_TRY(writeFileAtomic(r->dir_ + "/config.yml",
                             "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n"
                             "    rootdirectory: " +
                                 r->dir_ +
                                 "/store\n  delete:\n"
                                 "    enabled: true\nhttp:\n  addr: 127.0.0.1:" +
                                 std::to_string(port) + "\n" + auth));
  VESSEL_ASSIGN_OR_RETURN(Fd log,
                          Fd::open(r->dir_ + "/registry.log", O_WRONLY | O_CREAT | O_APPEND, 0644));
  VESSEL_ASSIGN_OR_RETURN(
      r->proc_,
      ChildProcess::spawn({.argv = {"/usr/bin/docker-registry", "serve", r->dir_ + "/config.yml"},
                           .fds = {{log.get(), 1}, {log.get(), 2}},
                           .die_with_parent = true}));
  for (auto until = std::chrono::steady_clock::now() + 20s; !answers(port);) {
    if (!r->proc_.running() || r->proc_.tryWait() || std::chrono::steady_clock::now() > until) {
      auto text = readFile(r->dir_ + "/registry.log");
      return Error(Code::kUnavailable,
                   "docker-registry did not start: " + (text.ok() ? text->substr(0, 2000) : ""));
    }
    std::this_thread::sleep_for(20ms);
  }
  return r;
}

TestRegistry::~TestRegistry() {
  stop();
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

void TestRegistry::stop() {
  if (proc_.running()) proc_.terminate(5s);
}

Result<std::string> TestRegistry::push(const std::string& root, const std::string& repo,
                                       const std::string& tag, const ImageSpec& spec) {
  std::string work = dir_ + "/build-" + repo.substr(repo.rfind('/') + 1) + "-" + tag;
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::create_directories(work, ec);
  std::string image = work + "/layout:" + tag;
  VESSEL_TRY(run({"umoci", "init", "--layout", work + "/layout"}));
  VESSEL_TRY(run({"umoci", "new", "--image", image}));
  VESSEL_TRY(run({"umoci", "unpack", "--image", image, work + "/bundle"}));
  VESSEL_TRY(run({"cp", "-a", root + "/.", work + "/bundle/rootfs/"}));
  VESSEL_TRY(run({"umoci", "repack", "--image", image, work + "/bundle"}));
  std::vector<std::string> cfg = {"umoci", "config",         "--image",
                                  image,   "--architecture", spec.architecture};
  for (const auto& e : spec.env) cfg.insert(cfg.end(), {"--config.env", e});
  for (const auto& e : spec.entrypoint) cfg.insert(cfg.end(), {"--config.entrypoint", e});
  for (const auto& e : spec.cmd) cfg.insert(cfg.end(), {"--config.cmd", e});
  for (const auto& p : spec.exposed_ports) cfg.insert(cfg.end(), {"--config.exposedports", p});
  if (!spec.working_dir.empty()) cfg.insert(cfg.end(), {"--config.workingdir", spec.working_dir});
  if (!spec.user.empty()) cfg.insert(cfg.end(), {"--config.user", spec.user});
  VESSEL_TRY(run(cfg));
  std::string dest = "docker://" + host_ + "/" + repo + ":" + tag;
  std::vector<std::string> copy = {"skopeo", "--insecure-policy", "copy", "--quiet",
                                   "--dest-tls-verify=false"};
  for (auto& f : creds("dest")) copy.push_back(std::move(f));
  copy.push_back("oci:" + image);
  copy.push_back(dest);
  VESSEL_TRY(run(copy));
  std::vector<std::string> inspect = {"skopeo", "inspect", "--raw", "--tls-verify=false"};
  for (auto& f : creds("")) inspect.push_back(std::move(f));
  inspect.push_back(dest);
  auto raw = os::runCommand(inspect);
  if (!raw.ok()) return std::move(raw).error();
  fs::remove_all(work, ec);
  return "sha256:" + sha256Hex(raw->out);
}

Result<std::vector<std::string>> TestRegistry::layers(const std::string& repo,
                                                      const std::string& tag) {
  std::vector<std::string> inspect = {"skopeo", "inspect", "--raw", "--tls-verify=false"};
  for (auto& f : creds("")) inspect.push_back(std::move(f));
  inspect.push_back("docker://" + host_ + "/" + repo + ":" + tag);
  auto raw = os::runCommand(inspect);
  if (!raw.ok()) return std::move(raw).error();
  VESSEL_ASSIGN_OR_RETURN(ImageManifest m, parseManifest(raw->out));
  std::vector<std::string> out;
  for (const auto& l : m.layers) out.push_back(l.digest);
  return out;
}

std::string TestRegistry::blobPath(const std::string& digest) const {
  std::string hex = digest.substr(7);
  return dir_ + "/store/docker/registry/v2/blobs/sha256/" + hex.substr(0, 2) + "/" + hex + "/data";
}

size_t TestRegistry::blobFetches(const std::string& repo, const std::string& digest) const {
  auto text = readFile(dir_ + "/registry.log", 64 << 20);
  if (!text.ok()) return 0;
  // The access log's line: "GET /v2/<repo>/blobs/<digest> HTTP/1.1" 200
  std::string needle = "\"GET /v2/" + repo + "/blobs/" + digest + " ";
  size_t n = 0;
  for (size_t at = 0; (at = text->find(needle, at)) != std::string::npos; at += needle.size()) ++n;
  return n;
}

Status makeBusyboxRoot(const std::string& dir) {
  std::error_code ec;
  for (const char* d : {"bin", "sbin", "etc", "root", "tmp", "usr/bin", "usr/sbin"})
    fs::create_directories(dir + "/" + d, ec);
  VESSEL_TRY(run({"cp", "/bin/busybox", dir + "/bin/busybox"}));
  auto list = os::runCommand({dir + "/bin/busybox", "--list-full"});
  if (!list.ok()) return std::move(list).error();
  size_t start = 0;
  for (size_t nl; (nl = list->out.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string applet = list->out.substr(start, nl - start);
    if (applet.empty() || applet.find("..") != std::string::npos) continue;
    fs::path p = dir + "/" + applet;
    if (!fs::exists(fs::symlink_status(p))) fs::create_symlink("/bin/busybox", p, ec);
  }
  fs::permissions(dir + "/tmp", fs::perms(01777), ec);
  VESSEL_TRY(writeFileAtomic(dir + "/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"));
  VESSEL_TRY(writeFileAtomic(dir + "/etc/group", "root:x:0:\n"));
  return okStatus();
}

}  // namespace vessel::images::testing
