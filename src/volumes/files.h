#pragma once
// A volume's files without a sandbox (GET/PUT/DELETE /v1/volumes/{name}/
// files...): every path is resolved beneath the volume's root with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV), so a
// symbolic link a guest made, absolute or full of "..", never leads
// outside the volume; ".." past the root is refused the same way. Final
// components are never followed where that would act on the link's
// target instead of the link (stat, remove, the rename of a write).
// Blocking calls: the API runs them on a worker thread.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

namespace vessel::volumes {

struct FileInfo {
  std::string name;  // the last component ("" for the root)
  std::string path;  // relative to the volume root, "/"-led ("/" for the root)
  std::string type;  // file | dir | symlink | other
  uint64_t size = 0;
  uint32_t mode = 0;  // permission bits
  uint32_t uid = 0, gid = 0;
  int64_t mtime_ms = 0, atime_ms = 0, ctime_ms = 0;
  std::string target;  // a symlink's, as stored (never followed here)
};

// At most this many entries in one listing (the API's answer stays bounded).
constexpr size_t kMaxListEntries = 10000;
// The deepest a listing descends (list's `depth`).
constexpr int kMaxListDepth = 64;

// What setAttributes changes; unset: left as it is.
struct Attributes {
  std::optional<uint32_t> mode;  // permission bits, at most 07777
  std::optional<uint32_t> uid, gid;
};

// A write's options: the new file's mode and owner, and whether it may
// replace a file already there (false: kAlreadyExists, checked when the
// write starts and again, atomically, when it is renamed into place).
struct WriteOptions {
  uint32_t mode = 0644;
  std::optional<uint32_t> uid, gid;
  bool replace = true;
};

// A volume path as a client gives it ("/a/b", "a/b", "" or "/" for the
// root) made relative ("a/b", "." for the root). Refused: longer than
// 4096 bytes, a NUL byte, an empty component ("a//b" is fine, it reads
// as "a/b"). ".." is left for the kernel to refuse past the root.
Result<std::string> relativePath(std::string_view path);

class VolumeFiles {
 public:
  // The volume mounted at `root_dir`; `read_only` refuses every change
  // (a snapshot) with kFailedPrecondition before touching anything.
  static Result<VolumeFiles> open(const std::string& root_dir, bool read_only);

  Result<FileInfo> stat(std::string_view path) const;
  // A directory's entries (sorted by name, at most kMaxListEntries), or
  // the stat of a file. With `depth` > 1 (at most kMaxListDepth) the
  // entries of its subdirectories too, to that many levels, each
  // directory's after it (links are listed, never descended into); at
  // most kMaxListEntries in all.
  Result<std::vector<FileInfo>> list(std::string_view path, int depth = 1) const;
  // A regular file for reading (kInvalidArgument for anything else).
  Result<Fd> openRead(std::string_view path) const;
  Status mkdir(std::string_view path, uint32_t mode, bool parents) const;
  // chmod and chown of the file, directory or link itself (a link is
  // never followed; it has no mode of its own: kInvalidArgument), and its
  // stat after.
  Result<FileInfo> setAttributes(std::string_view path, const Attributes& a) const;
  // Removes a file, link or empty directory; a directory with what it
  // holds when `recursive`. The root cannot be removed.
  Status remove(std::string_view path, bool recursive) const;

  // An atomic write: data to a temporary file beside the target, renamed
  // over it by commit(); dropped unfinished, it leaves nothing. ENOSPC at
  // the volume's size is kResourceExhausted.
  class Write {
   public:
    Write(Write&&) noexcept = default;
    Write& operator=(Write&&) = delete;
    ~Write();
    Status append(std::string_view data);
    Result<FileInfo> commit();

   private:
    friend class VolumeFiles;
    Write(Fd dir, Fd file, std::string tmp, std::string name, std::string path, bool replace)
        : dir_(std::move(dir)),
          file_(std::move(file)),
          tmp_(std::move(tmp)),
          name_(std::move(name)),
          path_(std::move(path)),
          replace_(replace) {}
    Fd dir_, file_;
    std::string tmp_, name_, path_;
    bool replace_ = true;
    uint64_t written_ = 0;
  };
  Result<Write> write(std::string_view path, uint32_t mode) const;
  Result<Write> write(std::string_view path, const WriteOptions& o) const;

 private:
  VolumeFiles(Fd root, bool read_only) : root_(std::move(root)), read_only_(read_only) {}
  Status writable(std::string_view what, std::string_view path) const;
  // The parent directory of `rel` (opened beneath the root) and its last
  // component; the root itself has none (kInvalidArgument).
  Result<std::pair<Fd, std::string>> parentOf(const std::string& rel) const;

  Fd root_;
  bool read_only_ = false;
};

}  // namespace vessel::volumes
