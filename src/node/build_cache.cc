#include "node/build_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <tuple>

#include "base/log.h"
#include "base/new_id.h"
#include "base/sha256.h"
#include "base/sparse_copy.h"

namespace vessel::node {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kSuffix = ".img";

// Length-prefixed, so that no two different inputs hash alike.
void field(std::string& out, std::string_view v) {
  out += std::to_string(v.size());
  out += ':';
  out += v;
}

void fields(std::string& out, const std::vector<std::string>& vs) {
  field(out, std::to_string(vs.size()));
  for (const auto& v : vs) field(out, v);
}

std::string stepText(const templates::BuildStep& s) {
  std::string t;
  field(t, std::to_string(static_cast<int>(s.kind)));
  field(t, s.text);
  fields(t, s.argv);
  field(t, s.user);
  field(t, s.workdir);
  fields(t, s.env);
  field(t, s.path);
  field(t, sha256Hex(s.content));
  field(t, std::to_string(s.mode));
  field(t, s.owner);
  return t;
}

bool validKey(const std::string& key) {
  return key.size() == 64 && std::all_of(key.begin(), key.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

std::vector<CachedInstruction> instructionKeys(const std::string& root,
                                               const std::vector<templates::BuildStep>& steps) {
  std::vector<CachedInstruction> out;
  std::string parent = root;
  for (const auto& r : instructionRanges(steps)) {
    std::string text;
    field(text, "vessel-build-step-v1");
    field(text, parent);
    for (size_t i = r.begin; i < r.end; ++i) field(text, stepText(steps[i]));
    parent = sha256Hex(text);
    out.push_back({r, parent});
  }
  return out;
}

std::string stepsRootKey(const StepsRoot& r) {
  std::string t;
  field(t, "vessel-build-root-v1");
  field(t, r.owner);
  field(t, r.base_sha256);
  field(t, r.kernel_sha256);
  field(t, r.qemu_version);
  field(t, r.from_image ? "image" : "base");
  fields(t, r.image_env);
  if (r.spec) {
    field(t, std::to_string(r.spec->files.size()));
    for (const auto& [path, content] : r.spec->files) {
      field(t, path);
      field(t, sha256Hex(content));
    }
    fields(t, r.spec->commands);
  }
  return sha256Hex(t);
}

std::optional<std::string> BuildCache::find(const std::string& key) {
  if (!validKey(key)) return std::nullopt;
  std::string path = dir_ + "/" + key + std::string(kSuffix);
  // Marked used: eviction goes by modification time.
  if (::utimensat(AT_FDCWD, path.c_str(), nullptr, 0) != 0) return std::nullopt;
  return path;
}

Status BuildCache::put(const std::string& key, const std::string& disk) {
  if (!validKey(key)) return Error(Code::kInternal, "build cache: bad key");
  std::string ctx = "build cache: keep " + disk;
  struct stat st {};
  if (::stat(disk.c_str(), &st) != 0) return Error::fromErrno(ctx);
  if (static_cast<uint64_t>(st.st_blocks) * 512 > (max_mib_ << 20)) return okStatus();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return Error(Code::kInternal, ctx + ": create " + dir_ + ": " + ec.message());
  std::string tmp = dir_ + "/.tmp-" + newId("c");
  // Bounded as it copies too: the file's writer (the build's QEMU) may
  // grow it meanwhile.
  Status copied = copySparse(disk, tmp, 0600, max_mib_ << 20);
  if (copied.ok()) {
    fs::rename(tmp, dir_ + "/" + key + std::string(kSuffix), ec);
    if (ec) copied = Error(Code::kInternal, ctx + ": rename: " + ec.message());
  }
  if (!copied.ok()) {
    fs::remove(tmp, ec);
    return std::move(copied).error().withContext(ctx);
  }
  evict();
  return okStatus();
}

uint64_t BuildCache::allocatedBytes() const {
  uint64_t bytes = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return bytes;
}

void BuildCache::evict() {
  struct Entry {
    std::string path;
    struct timespec used;
    uint64_t bytes;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    std::string name = e.path().filename().string();
    if (name.size() <= kSuffix.size() ||
        name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
      continue;  // a copy in flight (.tmp-) is not ours to take
    struct stat st {};
    if (::stat(e.path().c_str(), &st) != 0) continue;
    uint64_t bytes = static_cast<uint64_t>(st.st_blocks) * 512;
    entries.push_back({e.path().string(), st.st_mtim, bytes});
    total += bytes;
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.used.tv_sec, a.used.tv_nsec) < std::tie(b.used.tv_sec, b.used.tv_nsec);
  });
  for (const auto& e : entries) {
    if (total <= (max_mib_ << 20)) break;
    // Unlinking a disk a build is copying from leaves that copy whole.
    if (fs::remove(e.path, ec)) total -= e.bytes;
  }
  if (total > (max_mib_ << 20))
    Logger("templates")
        .warn("build cache {}: {} MiB over its bound", dir_, (total - (max_mib_ << 20)) >> 20);
}

}  // namespace vessel::node
