#include "templates/store.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "base/disk_space.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/sha256.h"

namespace vessel::templates {

namespace fs = std::filesystem;

uint64_t Template::baseDiskMib() const {
  if (rootfs_bytes) return (*rootfs_bytes + (1 << 20) - 1) >> 20;
  struct stat st {};
  if (::stat(path(kRootfsFile).c_str(), &st) != 0) return 0;
  return (static_cast<uint64_t>(st.st_size) + (1 << 20) - 1) >> 20;
}

uint64_t Template::defaultDiskMib() const {
  return std::max(manifest.disk_mib ? manifest.disk_mib : kDefaultDiskMib, baseDiskMib());
}

namespace {

bool validName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  return s[0] != '.';
}

// A version deleted while sandboxes used it (TemplateStore::remove).
constexpr const char* kRetiredFile = ".retired";

bool retiredDir(const std::string& dir) {
  std::error_code ec;
  return fs::exists(dir + "/" + kRetiredFile, ec);
}

Result<Manifest> readManifest(const std::string& dir) {
  VESSEL_ASSIGN_OR_RETURN(std::string text, readFile(dir + "/" + kManifestFile, 64 * 1024));
  auto m = parseManifest(text);
  if (!m.ok()) return std::move(m).error().withContext(dir);
  return m;
}

}  // namespace

namespace {

Result<TemplateStore::FileStamp> stampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error::fromErrno("template file " + path);
  return TemplateStore::FileStamp{
      st.st_ino, st.st_size,
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
      static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

}  // namespace

Result<TemplateStore::HashedFile> TemplateStore::hashFile(const std::string& path) {
  VESSEL_ASSIGN_OR_RETURN(FileStamp stamp, stampOf(path));
  VESSEL_ASSIGN_OR_RETURN(std::string sha, sha256File(path));
  return HashedFile{stamp, std::move(sha)};
}

Result<TemplateStore::FileStamp> TemplateStore::stampFile(const std::string& path) {
  return stampOf(path);
}

Status TemplateStore::verifyFile(const std::string& path, const std::string& want) {
  VESSEL_ASSIGN_OR_RETURN(FileStamp stamp, stampOf(path));
  auto it = verified_.find(path);
  std::string have;
  if (it != verified_.end() && it->second.first == stamp) {
    have = it->second.second;
  } else {
    VESSEL_ASSIGN_OR_RETURN(have, sha256File(path));
    verified_[path] = {stamp, have};
  }
  if (have != want)
    return Error(Code::kFailedPrecondition, "template file " + path + " is corrupt: sha256 " +
                                                have + ", manifest says " + want);
  return okStatus();
}

Result<std::shared_ptr<const Template>> TemplateStore::open(const std::string& name,
                                                            const std::string& version) {
  if (!validName(name)) return Error(Code::kInvalidArgument, "bad template name '" + name + "'");
  if (catalogue_) return openCatalogued(name, version);
  std::string v = version;
  if (v.empty()) {
    // Newest by creation time.
    std::string newest_at;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(root_ + "/" + name, ec)) {
      if (retiredDir(e.path().string())) continue;
      auto m = readManifest(e.path().string());
      if (m.ok() && m->created_at >= newest_at) {
        newest_at = m->created_at;
        v = m->version;
      }
    }
    if (v.empty()) return Error(Code::kNotFound, "template '" + name + "' does not exist");
  }
  if (!validName(v)) return Error(Code::kInvalidArgument, "bad template version '" + v + "'");
  auto t = std::make_shared<Template>();
  t->dir = root_ + "/" + name + "/" + v;
  std::string ctx = "template " + name + "@" + v;
  auto m = readManifest(t->dir);
  if (!m.ok()) {
    if (m.error().code() == Code::kNotFound) return Error(Code::kNotFound, ctx + " does not exist");
    return std::move(m).error().withContext(ctx);
  }
  t->manifest = std::move(*m);
  if (t->manifest.name != name || t->manifest.version != v)
    return Error(Code::kFailedPrecondition, ctx + ": manifest names another template");
  if (t->manifest.qemu_version != qemu_version_)
    return Error(Code::kFailedPrecondition, ctx + ": made with '" + t->manifest.qemu_version +
                                                "', this host runs '" + qemu_version_ +
                                                "'; rebuild the template");
  if (t->manifest.kernel_sha256 != kernel_sha256_)
    return Error(Code::kFailedPrecondition,
                 ctx + ": made with another guest kernel; rebuild the template");
  for (const auto& [file, sha] : t->manifest.files)
    VESSEL_TRY_CTX(verifyFile(t->path(file.c_str()), sha), ctx);
  return std::shared_ptr<const Template>(std::move(t));
}

std::vector<Manifest> TemplateStore::list() const {
  std::vector<Manifest> out;
  if (catalogue_) {
    auto all = catalogue_->list();
    if (!all.ok()) {
      Logger("templates").warn("template catalogue: {}", all.error().message());
      return out;
    }
    for (auto& e : *all) out.push_back(std::move(e.manifest));
    return out;
  }
  std::error_code ec;
  for (auto& n : fs::directory_iterator(root_, ec))
    for (auto& v : fs::directory_iterator(n.path(), ec))
      if (retiredDir(v.path().string()))
        continue;
      else if (auto m = readManifest(v.path().string()); m.ok())
        out.push_back(std::move(*m));
  std::sort(out.begin(), out.end(), [](const Manifest& a, const Manifest& b) {
    return std::tie(a.name, a.created_at) < std::tie(b.name, b.created_at);
  });
  return out;
}

Result<std::shared_ptr<const Template>> TemplateStore::install(
    const std::string& staging, Manifest m, const std::map<std::string, HashedFile>& hashed) {
  if (!validName(m.name) || !validName(m.version))
    return Error(Code::kInvalidArgument, "install template: bad name or version");
  std::string dest = root_ + "/" + m.name + "/" + m.version;
  std::error_code ec;
  if (fs::exists(dest + "/" + kManifestFile, ec))
    return Error(Code::kAlreadyExists, "template " + m.name + "@" + m.version + " exists");
  VESSEL_TRY(writeFileAtomic(staging + "/" + kManifestFile, toJson(m), 0444));
  fs::create_directories(root_ + "/" + m.name, ec);
  fs::remove_all(dest, ec);
  fs::rename(staging, dest, ec);
  if (ec) return Error(Code::kInternal, "install template at " + dest + ": " + ec.message());
  // Renaming the directory leaves its files' inodes and times as they were.
  for (const auto& [file, h] : hashed) verified_[dest + "/" + file] = {h.stamp, h.sha256};
  return open(m.name, m.version);
}

std::map<std::string, TemplateStore::HashedFile> TemplateStore::hashedFiles(
    const Template& t) const {
  std::map<std::string, HashedFile> out;
  for (const auto& [file, sha] : t.manifest.files) {
    auto it = verified_.find(t.path(file.c_str()));
    if (it != verified_.end() && it->second.second == sha)
      out[it->first] = {it->second.first, it->second.second};
  }
  return out;
}

void TemplateStore::noteHashed(const std::map<std::string, HashedFile>& by_path) {
  for (const auto& [path, h] : by_path) verified_[path] = {h.stamp, h.sha256};
}

void TemplateStore::release(const std::string& id) {
  auto it = in_use_.find(id);
  if (it == in_use_.end() || --it->second > 0) return;
  in_use_.erase(it);
  // The last sandbox of a retired version let go: its files go now.
  auto at = id.find('@');
  if (at == std::string::npos || catalogue_) return;
  std::string name = id.substr(0, at), version = id.substr(at + 1);
  if (validName(name) && validName(version) && retired(name, version)) {
    std::error_code ec;
    fs::remove_all(root_ + "/" + name + "/" + version, ec);
  }
}

bool TemplateStore::retired(const std::string& name, const std::string& version) const {
  return !catalogue_ && validName(name) && validName(version) &&
         retiredDir(root_ + "/" + name + "/" + version);
}

bool TemplateStore::inUse(const std::string& id) const { return in_use_.count(id) > 0; }

Status TemplateStore::remove(const std::string& name, const std::string& version) {
  if (!validName(name) || !validName(version))
    return Error(Code::kInvalidArgument, "bad template name or version");
  if (catalogue_) return catalogue_->remove(name, version);
  std::string dir = root_ + "/" + name + "/" + version;
  std::error_code ec;
  if (!fs::exists(dir, ec))
    return Error(Code::kNotFound, "template " + name + "@" + version + " does not exist");
  if (inUse(name + "@" + version)) return writeFileAtomic(dir + "/" + kRetiredFile, "", 0600);
  fs::remove_all(root_ + "/" + name + "/" + version, ec);
  if (ec) return Error(Code::kInternal, "remove template: " + ec.message());
  return okStatus();
}

int TemplateStore::collectGarbage() {
  if (catalogue_) return 0;                   // the nodes collect their own files
  std::map<std::string, std::string> newest;  // name -> created_at
  auto all = list();
  for (const auto& m : all) newest[m.name] = std::max(newest[m.name], m.created_at);
  int removed = 0;
  for (const auto& m : all) {
    if (m.created_at == newest[m.name] || inUse(m.name + "@" + m.version)) continue;
    if (remove(m.name, m.version).ok()) ++removed;
  }
  // Retired versions whose sandboxes are gone (one ended while another
  // vesseld ran, or before this one adopted the rest).
  std::error_code ec;
  for (auto& n : fs::directory_iterator(root_, ec))
    for (auto& v : fs::directory_iterator(n.path(), ec)) {
      std::string name = n.path().filename().string(), version = v.path().filename().string();
      if (!retiredDir(v.path().string()) || inUse(name + "@" + version)) continue;
      std::error_code rm;
      fs::remove_all(v.path(), rm);
      if (!rm) ++removed;
    }
  return removed;
}

Status TemplateStore::checkSpace(std::string_view what, uint64_t need_mib) const {
  VESSEL_TRY(checkFreeDisk(root_, min_free_mib_, what));
  if (need_mib == 0) return okStatus();
  VESSEL_ASSIGN_OR_RETURN(uint64_t free_mib, freeDiskMib(root_));
  if (free_mib >= need_mib + min_free_mib_) return okStatus();
  return Error(Code::kResourceExhausted,
               std::string(what) + " refused: it may need up to " + std::to_string(need_mib) +
                   " MiB and " + root_ + " has " + std::to_string(free_mib) + " MiB free (" +
                   std::to_string(min_free_mib_) +
                   " MiB kept free, --min-free-disk-mib); delete sandboxes or templates");
}

uint64_t TemplateStore::allocatedMib(const std::string& name_prefix) const {
  constexpr std::string_view kStaging = ".staging-";
  uint64_t bytes = 0;
  if (catalogue_) {
    // The files' sizes as registered (a sparse image counts whole here).
    auto all = catalogue_->list();
    if (all.ok())
      for (const auto& e : *all)
        if (e.manifest.name.compare(0, name_prefix.size(), name_prefix) == 0)
          bytes += e.totalBytes();
    return (bytes + (1 << 20) - 1) >> 20;
  }
  std::error_code ec;
  for (const auto& top : fs::directory_iterator(root_, ec)) {
    std::string name = top.path().filename().string();
    if (name.compare(0, kStaging.size(), kStaging) == 0) name.erase(0, kStaging.size());
    if (name.compare(0, name_prefix.size(), name_prefix) != 0) continue;
    std::error_code walk_ec;
    for (fs::recursive_directory_iterator it(top.path(), walk_ec), end; !walk_ec && it != end;
         it.increment(walk_ec)) {
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
        bytes += static_cast<uint64_t>(st.st_blocks) * 512;  // sparse images count as written
    }
  }
  return (bytes + (1 << 20) - 1) >> 20;
}

bool TemplateStore::has(const std::string& name) const {
  if (!validName(name)) return false;
  if (catalogue_) {
    auto e = catalogue_->get(name, "");
    return e.ok() && e->has_value();
  }
  std::error_code ec;
  for (auto& v : fs::directory_iterator(root_ + "/" + name, ec))
    if (!retiredDir(v.path().string())) return true;
  return false;
}

Result<std::shared_ptr<const Template>> TemplateStore::openCatalogued(const std::string& name,
                                                                      const std::string& version) {
  if (!version.empty() && !validName(version))
    return Error(Code::kInvalidArgument, "bad template version '" + version + "'");
  VESSEL_ASSIGN_OR_RETURN(auto e, catalogue_->get(name, version));
  if (!e)
    return Error(Code::kNotFound,
                 "template '" + name + (version.empty() ? "" : "@" + version) + "' does not exist");
  auto t = std::make_shared<Template>();
  t->manifest = std::move(e->manifest);
  if (auto it = e->sizes.find(kRootfsFile); it != e->sizes.end()) t->rootfs_bytes = it->second;
  return std::shared_ptr<const Template>(std::move(t));
}

Result<CatalogueEntry> TemplateStore::entryOf(const Template& t, std::string owner) {
  CatalogueEntry e;
  e.manifest = t.manifest;
  e.owner = std::move(owner);
  for (const auto& [file, sha] : t.manifest.files) {
    struct stat st {};
    std::string p = t.path(file.c_str());
    if (::stat(p.c_str(), &st) != 0) return Error::fromErrno("template file " + p);
    e.sizes[file] = static_cast<uint64_t>(st.st_size);
  }
  return e;
}

}  // namespace vessel::templates
