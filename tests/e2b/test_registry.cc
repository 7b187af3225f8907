// A registry on 127.0.0.1 for builder.test.mjs (E2B's Template builder):
// Debian's docker-registry with one image, e2b/busybox:1, made from
// busybox-static with umoci and pushed with skopeo (images/testing), and a
// second one behind a username and password (kPrivateUser, kPrivatePass)
// with e2b/private:1. Prints both host:ports on one line, then serves until
// its stdin closes (the test, or its death), and removes everything.
// Nothing leaves the machine.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "images/testing/registry.h"

using vessel::images::testing::TestRegistry;

// E2B's waitForPort runs `ss -Htuln sport = :PORT` (iproute2's, as in
// E2B's images); busybox has netstat instead. The image carries an `ss`
// that answers that one question, as an image with iproute2 would.
constexpr const char* kSs =
    "#!/bin/sh\n"
    "port=\"${4#:}\"\n"
    "netstat -tln | grep -E \"[:.]${port}[[:space:]]\"\n";

int main() {
  auto reg = TestRegistry::start();
  if (!reg.ok()) {
    std::fprintf(stderr, "registry: %s\n", reg.error().message().c_str());
    return 2;
  }
  std::string root = (*reg)->dir() + "/busybox-root";
  if (auto s = vessel::images::testing::makeBusyboxRoot(root); !s.ok()) {
    std::fprintf(stderr, "busybox root: %s\n", s.error().message().c_str());
    return 2;
  }
  std::ofstream(root + "/usr/bin/ss") << kSs;
  ::chmod((root + "/usr/bin/ss").c_str(), 0755);
  auto pushed = (*reg)->push(root, "e2b/busybox", "1");
  if (!pushed.ok()) {
    std::fprintf(stderr, "push: %s\n", pushed.error().message().c_str());
    return 2;
  }
  auto priv = TestRegistry::start({"e2b-user", "e2b-registry-pass-1234"});
  if (!priv.ok()) {
    std::fprintf(stderr, "private registry: %s\n", priv.error().message().c_str());
    return 2;
  }
  if (auto s = (*priv)->push(root, "e2b/private", "1"); !s.ok()) {
    std::fprintf(stderr, "push private: %s\n", s.error().message().c_str());
    return 2;
  }
  std::printf("%s %s\n", (*reg)->host().c_str(), (*priv)->host().c_str());
  std::fflush(stdout);
  char buf[256];
  while (::read(0, buf, sizeof buf) > 0) {
  }
  return 0;
}
