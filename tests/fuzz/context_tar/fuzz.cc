// A Dockerfile build's context tar (POST /v1/templates:dockerfile,
// templates/context_archive.h): any bytes unpack within their limits or
// give an Error, and nothing is ever made outside the directory given. On
// success it holds only directories, regular files without setuid, setgid
// or sticky bits, and symbolic links, the files' bytes within the limit.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "templates/context_archive.h"

namespace fs = std::filesystem;

namespace {

// One scratch directory per process: root/in.tar, root/ctx (unpacked into)
// and root/outside (a canary that must stay empty).
const std::string& scratch() {
  static const std::string root = [] {
    char t[] = "/tmp/fuzz-context-tar-XXXXXX";
    if (!::mkdtemp(t)) __builtin_trap();
    return std::string(t);
  }();
  return root;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& root = scratch();
  std::error_code ec;
  fs::remove_all(root + "/ctx", ec);
  fs::remove_all(root + "/outside", ec);
  fs::create_directory(root + "/ctx");
  fs::create_directory(root + "/outside");
  int fd = ::open((root + "/in.tar").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) __builtin_trap();
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) __builtin_trap();
  ::close(fd);
  vessel::templates::UnpackLimits limits;
  limits.max_bytes = 1 << 20;
  limits.max_entries = 256;
  auto st = vessel::templates::unpackContextTar(root + "/in.tar", root + "/ctx", limits);
  // Whatever the tar said, the canary and the scratch root gained nothing.
  if (!fs::is_empty(root + "/outside")) __builtin_trap();
  for (const auto& e : fs::directory_iterator(root)) {
    std::string n = e.path().filename();
    if (n != "in.tar" && n != "ctx" && n != "outside") __builtin_trap();
  }
  if (!st.ok()) return 0;
  uint64_t bytes = 0;
  size_t entries = 0;
  for (auto it = fs::recursive_directory_iterator(root + "/ctx"); it != fs::end(it); ++it) {
    auto s = it->symlink_status();
    ++entries;
    if (fs::is_symlink(s)) continue;
    if (fs::is_directory(s)) continue;
    if (!fs::is_regular_file(s)) __builtin_trap();
    auto p = s.permissions();
    if ((p & (fs::perms::set_uid | fs::perms::set_gid | fs::perms::sticky_bit)) != fs::perms::none)
      __builtin_trap();
    bytes += fs::file_size(it->path());
  }
  if (bytes > limits.max_bytes || entries > limits.max_entries + 1) __builtin_trap();
  return 0;
}
