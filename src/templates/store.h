#pragma once
// TemplateStore: immutable, versioned template directories under one root,
// <root>/<name>/<version>/{rootfs.ext4, memory, state, manifest.json}.
// open() refuses a template whose manifest does not match this host (QEMU
// version, guest kernel) or whose files do not match their checksums; the
// checksum of a file is recomputed whenever its inode, size, mtime or ctime
// change, so a corrupted file is caught before any restore from it.
//
// On an API replica (vesseld --role=api) the store holds no files: it
// serves the cluster's catalogue (useCatalogue; templates/catalogue.h)
// instead, so listings, admission and builds' base checks read the
// manifests every node registered.
// Used from one thread (the node's io thread).
#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "templates/catalogue.h"
#include "templates/manifest.h"

namespace vessel::templates {

struct Template {
  Manifest manifest;
  std::string dir;  // "" for one served from the catalogue (no files here)
  // The root image's size as the catalogue records it (no files here).
  std::optional<uint64_t> rootfs_bytes;
  std::string path(const char* file) const { return dir + "/" + file; }
  std::string id() const { return manifest.name + "@" + manifest.version; }
  // The root image's size in MiB (rounded up): the smallest disk a sandbox
  // of this template can have. 0 if the image cannot be read.
  uint64_t baseDiskMib() const;
  // What a create gets without asking: the manifest's disk_mib, else
  // kDefaultDiskMib; never below baseDiskMib().
  uint64_t defaultDiskMib() const;
};

class TemplateStore {
 public:
  TemplateStore(std::string root, std::string qemu_version, std::string kernel_sha256)
      : root_(std::move(root)),
        qemu_version_(std::move(qemu_version)),
        kernel_sha256_(std::move(kernel_sha256)) {}

  const std::string& root() const { return root_; }
  const std::string& qemuVersion() const { return qemu_version_; }
  const std::string& kernelSha256() const { return kernel_sha256_; }
  // Serve `c` instead of files (an API replica); it must outlive the store.
  void useCatalogue(Catalogue* c) { catalogue_ = c; }
  bool servesCatalogue() const { return catalogue_ != nullptr; }
  // Whether any version of `name` exists (is installed, or catalogued).
  bool has(const std::string& name) const;
  // `t`'s catalogue entry: its manifest and its files' sizes.
  static Result<CatalogueEntry> entryOf(const Template& t, std::string owner);
  // Builds (and forks into templates) are refused while the store's
  // filesystem has less than `mib` free (0: never); see checkSpace().
  void setMinFreeMib(uint64_t mib) { min_free_mib_ = mib; }
  // Before a build writes a new version: kResourceExhausted when the
  // store's disk is below the threshold, or when `need_mib` more would not
  // fit above it (a build's worst case: its memory file and image).
  Status checkSpace(std::string_view what, uint64_t need_mib = 0) const;
  // The newest version of `name` when version is empty.
  Result<std::shared_ptr<const Template>> open(const std::string& name,
                                               const std::string& version = "");
  // Every installed template's manifest (unverified; for listings).
  std::vector<Manifest> list() const;
  // A file as open() recognises one it has checked: its inode, size and times.
  struct FileStamp {
    ino_t ino;
    off_t size;
    int64_t mtime_ns, ctime_ns;
    bool operator==(const FileStamp&) const = default;
  };
  struct HashedFile {
    FileStamp stamp;
    std::string sha256;
  };
  // The file's stamp, then its checksum: blocking (seconds for GiBs), for a
  // worker thread. A file changed while it was read does not match the stamp
  // at its next check and is hashed again.
  static Result<HashedFile> hashFile(const std::string& path);
  // The stamp alone (a file hashed as it was written, e.g. a fetched one).
  static Result<FileStamp> stampFile(const std::string& path);

  // Moves a fully written directory (all files but the manifest) into
  // place, writing the manifest last: a crash leaves no half template.
  // `hashed` (by file name, from hashFile on the staged files) spares
  // open() hashing them again on the caller's thread.
  Result<std::shared_ptr<const Template>> install(
      const std::string& staging_dir, Manifest m,
      const std::map<std::string, HashedFile>& hashed = {});
  // What this store has checked of `t`'s files (by path), for another
  // store over the same root (the build worker's, handing its work to the
  // io thread's): noteHashed() there spares hashing them again.
  std::map<std::string, HashedFile> hashedFiles(const Template& t) const;
  void noteHashed(const std::map<std::string, HashedFile>& by_path);

  // Disk the templates whose stored name starts with `name_prefix` take
  // (every version, and builds of them in flight), in MiB allocated: a
  // tenant's share of the node's disk (quotas).
  uint64_t allocatedMib(const std::string& name_prefix) const;

  // Sandboxes hold a reference while they use a template.
  void acquire(const std::string& template_id) { ++in_use_[template_id]; }
  void release(const std::string& template_id);
  bool inUse(const std::string& template_id) const;
  // Deletes one version. One that sandboxes still use is retired instead:
  // listings and opens by name alone no longer see it (no new sandbox
  // starts from it, a build of the same spec makes a new version), opens
  // by name and version still do (its sandboxes resume and fork), and its
  // files go when the last of them lets go (release, collectGarbage).
  Status remove(const std::string& name, const std::string& version);
  bool retired(const std::string& name, const std::string& version) const;
  // Deletes every version that is neither the newest of its name nor in
  // use, and every retired one no longer in use.
  int collectGarbage();

 private:
  Status verifyFile(const std::string& path, const std::string& want_sha256);

  Result<std::shared_ptr<const Template>> openCatalogued(const std::string& name,
                                                         const std::string& version);

  std::string root_;
  Catalogue* catalogue_ = nullptr;
  uint64_t min_free_mib_ = 0;
  std::string qemu_version_;
  std::string kernel_sha256_;
  std::map<std::string, int> in_use_;
  std::map<std::string, std::pair<FileStamp, std::string>> verified_;  // path -> stamp, sha
};

}  // namespace vessel::templates
