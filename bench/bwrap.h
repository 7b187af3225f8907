#pragma once
// A bubblewrap container beside the sandboxes (issue 16): the same first
// command over the debian template's root filesystem, read-only (its image
// loop-mounted for the run), so the tables compare a VM create with a
// container start on the same machine at the same time.
#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace vessel::bench {

class BwrapRoot {
 public:
  // Mounts `image` (ext4) read-only on a fresh directory; ok() says if it
  // worked (needs root and loop devices).
  explicit BwrapRoot(const std::string& image) {
    dir_ = std::filesystem::temp_directory_path() /
           ("vessel-bench-bwrap-" + std::to_string(::getpid()));
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    std::string cmd = "mount -o loop,ro '" + image + "' '" + dir_ + "' 2>&1";
    mounted_ = !image.empty() && std::system(cmd.c_str()) == 0;
    if (!mounted_) std::fprintf(stderr, "bwrap: cannot mount %s\n", image.c_str());
  }
  ~BwrapRoot() {
    // Lazy: a container still exiting must not keep the loop device.
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    std::error_code ec;
    std::filesystem::remove(dir_, ec);
  }
  BwrapRoot(const BwrapRoot&) = delete;
  BwrapRoot& operator=(const BwrapRoot&) = delete;
  bool ok() const { return mounted_; }

  // `n` containers started at once, each running `true`; the time from the
  // start to each one's exit, ms (failures left out).
  std::vector<double> burst(int n) const {
    std::vector<std::string> args = {
        "bwrap", "--ro-bind", dir_,      "/",    "--proc",        "/proc",
        "--dev", "/dev",      "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent",
        "true"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    auto t0 = std::chrono::steady_clock::now();
    std::map<pid_t, bool> live;
    for (int i = 0; i < n; ++i) {
      pid_t pid = -1;
      if (::posix_spawnp(&pid, "bwrap", nullptr, nullptr, argv.data(), environ) == 0)
        live[pid] = true;
    }
    // Each child by its pid (the caller's other children, QEMU processes,
    // are not ours to reap), every millisecond.
    std::vector<double> out;
    while (!live.empty()) {
      for (auto it = live.begin(); it != live.end();) {
        int st = 0;
        if (::waitpid(it->first, &st, WNOHANG) == 0) {
          ++it;
          continue;
        }
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) out.push_back(ms);
        it = live.erase(it);
      }
      if (!live.empty()) ::usleep(1000);
    }
    return out;
  }
  // `n` one after the other.
  std::vector<double> loop(int n) const {
    std::vector<double> out;
    for (int i = 0; i < n; ++i)
      for (double v : burst(1)) out.push_back(v);
    return out;
  }

 private:
  std::string dir_;
  bool mounted_ = false;
};

}  // namespace vessel::bench
