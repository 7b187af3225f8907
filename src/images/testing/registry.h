#pragma once
// A real OCI registry for tests: Debian's docker-registry (distribution)
// on 127.0.0.1, storing in a scratch directory, its access log kept so a
// test can count what was pulled. Images are made from a directory of
// files with umoci and pushed with skopeo. Stopped and removed with the
// object. No traffic leaves the machine.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/child_process.h"
#include "base/result.h"

namespace vessel::images::testing {

struct ImageSpec {
  std::string architecture = "amd64";
  std::vector<std::string> env, entrypoint, cmd;
  std::string working_dir, user;
  std::vector<std::string> exposed_ports;
};

// A registry behind a password (htpasswd, bcrypt): every request,
// pushes and pulls alike, needs `username` and `password`.
struct RegistryOptions {
  std::string username, password;
};

class TestRegistry {
 public:
  // kFailedPrecondition when docker-registry, skopeo or umoci is missing.
  static Result<std::unique_ptr<TestRegistry>> start(const RegistryOptions& o = {});
  ~TestRegistry();
  TestRegistry(const TestRegistry&) = delete;
  TestRegistry& operator=(const TestRegistry&) = delete;

  // "127.0.0.1:PORT"
  const std::string& host() const { return host_; }
  const std::string& dir() const { return dir_; }
  // Pushes the files of `root` as a one-layer image `repo:tag`; its
  // manifest digest.
  Result<std::string> push(const std::string& root, const std::string& repo, const std::string& tag,
                           const ImageSpec& spec = {});
  // The digests of an image's layers, as the registry stores them.
  Result<std::vector<std::string>> layers(const std::string& repo, const std::string& tag);
  // Where the registry keeps a blob's bytes (to corrupt one).
  std::string blobPath(const std::string& digest) const;
  // Access-log lines that fetched `digest` from `repo` (GET .../blobs/<digest>).
  size_t blobFetches(const std::string& repo, const std::string& digest) const;
  // Stops the registry (it can no longer be reached).
  void stop();

 private:
  TestRegistry() = default;
  // skopeo's flags for this registry's credentials (prefix "src"/"dest"/"").
  std::vector<std::string> creds(const std::string& prefix) const;

  std::string dir_, host_;
  RegistryOptions opts_;
  ChildProcess proc_;
};

// A small root filesystem of busybox-static (sh and its applets), with
// /etc/passwd naming root only: what a minimal image on a registry is.
Status makeBusyboxRoot(const std::string& dir);

}  // namespace vessel::images::testing
