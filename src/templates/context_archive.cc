#include "templates/context_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/fd.h"
#include "base/split.h"
#include "templates/build_context.h"

namespace vessel::templates {

namespace fs = std::filesystem;

namespace {

// libarchive's message for its last error; it has none (NULL) after some
// refusals of a malformed header, which must not reach a std::string.
std::string archiveError(archive* a) {
  const char* m = archive_error_string(a);
  return m ? std::string(m) : std::string("a malformed archive");
}

constexpr size_t kMaxName = 4096;
constexpr size_t kMaxDepth = 128;

using ReadArchive = std::unique_ptr<archive, decltype(&archive_read_free)>;
using WriteArchive = std::unique_ptr<archive, decltype(&archive_write_free)>;
using Entry = std::unique_ptr<archive_entry, decltype(&archive_entry_free)>;

Error memberError(std::string_view name, const std::string& why) {
  std::string shown(name.substr(0, 200));
  return Error(Code::kInvalidArgument, "build context tar: member '" + shown + "': " + why);
}

// A member's name as plain segments ("./a//b/" is a, b; "" or "." the
// root), or why it cannot be in the tree.
Result<std::vector<std::string>> memberPath(std::string_view name) {
  if (name.size() > kMaxName) return memberError(name, "a name over 4096 bytes");
  if (!name.empty() && name[0] == '/') return memberError(name, "an absolute name");
  std::vector<std::string> out;
  for (std::string_view seg : splitView(name, '/')) {
    if (seg.empty() || seg == ".") continue;
    if (seg == "..") return memberError(name, "a name with '..'");
    out.emplace_back(seg);
  }
  if (out.size() > kMaxDepth) return memberError(name, "more than 128 directories deep");
  return out;
}

std::string joined(const std::vector<std::string>& segs, size_t n) {
  std::string p;
  for (size_t i = 0; i < n; ++i) p += (i ? "/" : "") + segs[i];
  return p;
}

// openat2 beneath `dir`, through no symbolic link at all: a member's
// directory is a directory of the tree, not a link out of it (or into it).
int openBeneath(int dir, const std::string& rel, uint64_t flags) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  return static_cast<int>(::syscall(SYS_openat2, dir, rel.c_str(), &how, sizeof how));
}

// The directory of a member's first `n` segments, made where missing (a
// tar need not list its directories).
Result<Fd> directoryOf(int root, const std::vector<std::string>& segs, size_t n,
                       std::string_view name) {
  Fd cur(::fcntl(root, F_DUPFD_CLOEXEC, 0));
  if (!cur) return Error::fromErrno("build context: dup");
  for (size_t i = 0; i < n; ++i) {
    if (::mkdirat(cur.get(), segs[i].c_str(), 0755) != 0 && errno != EEXIST)
      return memberError(name,
                         "make its directory " + joined(segs, i + 1) + ": " + std::strerror(errno));
    Fd next(openBeneath(cur.get(), segs[i], O_PATH | O_DIRECTORY));
    if (!next)
      return memberError(
          name, errno == ELOOP ? "would be written through the symbolic link " + joined(segs, i + 1)
                               : joined(segs, i + 1) + " is not a directory");
    cur = std::move(next);
  }
  return cur;
}

// Makes room for a non-directory member: an earlier member of the same
// name (tar lets a later one replace it) goes, unless it is a directory.
Status replaceable(int dir, const std::string& base, std::string_view name) {
  if (::unlinkat(dir, base.c_str(), 0) == 0 || errno == ENOENT) return okStatus();
  if (errno == EISDIR || errno == EPERM)
    return memberError(name, "an earlier member of that name is a directory");
  return memberError(name, std::string("replace an earlier member: ") + std::strerror(errno));
}

class Unpacker {
 public:
  Unpacker(archive* a, Fd root, UnpackLimits limits) : a_(a), root_(std::move(root)), l_(limits) {}
  Status member(archive_entry* e);

 private:
  Status directory(archive_entry* e, const std::vector<std::string>& segs, std::string_view name);
  Status file(archive_entry* e, int dir, const std::string& base, std::string_view name);
  Status hardLink(const char* target, int dir, const std::string& base, std::string_view name);

  archive* a_;
  Fd root_;
  UnpackLimits l_;
  uint64_t bytes_ = 0;
  size_t entries_ = 0;
};

Status Unpacker::member(archive_entry* e) {
  const char* raw = archive_entry_pathname(e);
  if (!raw) raw = archive_entry_pathname_utf8(e);
  if (!raw) return memberError("?", "a name that cannot be read");
  std::string_view name(raw);
  if (++entries_ > l_.max_entries)
    return Error(Code::kResourceExhausted,
                 "build context tar: more than " + std::to_string(l_.max_entries) + " members");
  VESSEL_ASSIGN_OR_RETURN(auto segs, memberPath(name));
  const char* link = archive_entry_hardlink(e);
  auto type = archive_entry_filetype(e);
  if (!link && type == AE_IFDIR) return directory(e, segs, name);
  if (segs.empty()) return memberError(name, "the context's root that is not a directory");
  VESSEL_ASSIGN_OR_RETURN(Fd dir, directoryOf(root_.get(), segs, segs.size() - 1, name));
  const std::string& base = segs.back();
  if (link) return hardLink(link, dir.get(), base, name);
  if (type == AE_IFREG) return file(e, dir.get(), base, name);
  if (type == AE_IFLNK) {
    const char* target = archive_entry_symlink(e);
    if (!target || !*target) return memberError(name, "a symbolic link to nothing");
    if (std::strlen(target) > kMaxName) return memberError(name, "a link target over 4096 bytes");
    VESSEL_TRY(replaceable(dir.get(), base, name));
    // Kept as a link: nothing is ever written through it (directoryOf),
    // and BuildContext refuses to copy one.
    if (::symlinkat(target, dir.get(), base.c_str()) != 0)
      return memberError(name, std::string("make the link: ") + std::strerror(errno));
    return okStatus();
  }
  return memberError(name,
                     "a device, FIFO or socket (a build context holds files, directories and "
                     "symbolic links)");
}

Status Unpacker::directory(archive_entry* e, const std::vector<std::string>& segs,
                           std::string_view name) {
  VESSEL_ASSIGN_OR_RETURN(Fd d, directoryOf(root_.get(), segs, segs.size(), name));
  // Its mode, but always one this process can write into and remove.
  Fd rw(openBeneath(d.get(), ".", O_RDONLY | O_DIRECTORY));
  auto mode = static_cast<mode_t>((archive_entry_perm(e) & 0777) | 0700);
  if (!rw || ::fchmod(rw.get(), mode) != 0)
    return memberError(name, std::string("set its mode: ") + std::strerror(errno));
  return okStatus();
}

Status Unpacker::file(archive_entry* e, int dir, const std::string& base, std::string_view name) {
  la_int64_t size = archive_entry_size(e);
  if (size < 0) return memberError(name, "a negative size");
  bytes_ += static_cast<uint64_t>(size);
  if (bytes_ > l_.max_bytes)
    return Error(Code::kResourceExhausted, "build context tar: its files come to more than " +
                                               std::to_string(l_.max_bytes >> 20) + " MiB");
  VESSEL_TRY(replaceable(dir, base, name));
  Fd out(::openat(dir, base.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return memberError(name, std::string("create: ") + std::strerror(errno));
  for (;;) {
    const void* buf = nullptr;
    size_t n = 0;
    la_int64_t off = 0;
    int r = archive_read_data_block(a_, &buf, &n, &off);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) return memberError(name, archiveError(a_));
    // A sparse member's blocks stay within the size counted above.
    if (off < 0 || static_cast<uint64_t>(off) + n > static_cast<uint64_t>(size))
      return memberError(name, "data past its size");
    for (size_t done = 0; done < n;) {
      ssize_t w = ::pwrite(out.get(), static_cast<const char*>(buf) + done, n - done,
                           static_cast<off_t>(off + static_cast<la_int64_t>(done)));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return Error::fromErrno("build context: write " + std::string(name));
      done += static_cast<size_t>(w);
    }
  }
  if (::ftruncate(out.get(), static_cast<off_t>(size)) != 0 ||
      ::fchmod(out.get(), static_cast<mode_t>(archive_entry_perm(e) & 0777)) != 0)
    return Error::fromErrno("build context: finish " + std::string(name));
  return okStatus();
}

Status Unpacker::hardLink(const char* target, int dir, const std::string& base,
                          std::string_view name) {
  auto t = memberPath(target);
  if (!t.ok() || t->empty()) return memberError(name, "a hard link out of the tree");
  VESSEL_ASSIGN_OR_RETURN(Fd tdir, directoryOf(root_.get(), *t, t->size() - 1, name));
  VESSEL_TRY(replaceable(dir, base, name));
  // No AT_SYMLINK_FOLLOW: a link to a symbolic link is another name of
  // that link, not of what it points to.
  if (::linkat(tdir.get(), t->back().c_str(), dir, base.c_str(), 0) != 0)
    return memberError(name, "a hard link to '" + std::string(target).substr(0, 200) +
                                 "', which is no earlier file of the tar (" + std::strerror(errno) +
                                 ")");
  return okStatus();
}

}  // namespace

Status unpackContextTar(const std::string& tar, const std::string& dir, UnpackLimits limits) {
  ReadArchive a(archive_read_new(), &archive_read_free);
  if (!a) return Error(Code::kInternal, "build context tar: out of memory");
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_none(a.get());
  if (archive_read_open_filename(a.get(), tar.c_str(), 1 << 16) != ARCHIVE_OK)
    return Error(Code::kInvalidArgument, "build context: not a tar: " + archiveError(a.get()));
  VESSEL_ASSIGN_OR_RETURN(Fd root, Fd::open(dir, O_PATH | O_DIRECTORY));
  Unpacker u(a.get(), std::move(root), limits);
  for (;;) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN)
      return Error(Code::kInvalidArgument, "build context: not a tar: " + archiveError(a.get()));
    VESSEL_TRY(u.member(e));
  }
  return okStatus();
}

Result<std::string> readContextFile(const std::string& dir, const std::string& rel,
                                    size_t max_bytes) {
  auto segs = memberPath(rel);
  if (!segs.ok() || segs->empty())
    return Error(Code::kInvalidArgument,
                 "'" + rel.substr(0, 200) + "' is no path in the build context");
  VESSEL_ASSIGN_OR_RETURN(Fd root, Fd::open(dir, O_PATH | O_DIRECTORY));
  Fd f(openBeneath(root.get(), joined(*segs, segs->size()), O_RDONLY | O_NOFOLLOW));
  std::string shown = rel.substr(0, 200);
  if (!f && errno == ENOENT)
    return Error(Code::kInvalidArgument, "no " + shown + " in the build context");
  if (!f && errno == ELOOP)
    return Error(Code::kInvalidArgument, shown + " is (or is under) a symbolic link");
  struct stat st {};
  if (!f || ::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Error(Code::kInvalidArgument, shown + " in the build context is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return Error(Code::kInvalidArgument,
                 shown + " is larger than " + std::to_string(max_bytes >> 10) + " KiB");
  std::string out(static_cast<size_t>(st.st_size), '\0');
  for (size_t got = 0; got < out.size();) {
    ssize_t n = ::read(f.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error::fromErrno("read " + shown);
    got += static_cast<size_t>(n);
  }
  return out;
}

namespace {

class TarWriter {
 public:
  explicit TarWriter(archive* a) : a_(a) {}
  Status add(const std::string& path, const std::string& name, const struct stat& st);
  Status addBytes(const std::string& name, const std::string& content);
  ContextTarStats stats;

 private:
  Status header(archive_entry* e, const std::string& name);
  archive* a_;
};

Status TarWriter::header(archive_entry* e, const std::string& name) {
  archive_entry_copy_pathname(e, name.c_str());
  archive_entry_set_uid(e, 0);
  archive_entry_set_gid(e, 0);
  archive_entry_set_mtime(e, 0, 0);  // the build's cache keys by content, not time
  ++stats.entries;
  if (archive_write_header(a_, e) < ARCHIVE_WARN)
    return Error(Code::kInternal, "write the context tar: " + name + ": " + archiveError(a_));
  return okStatus();
}

Status TarWriter::add(const std::string& path, const std::string& name, const struct stat& st) {
  Entry e(archive_entry_new(), &archive_entry_free);
  archive_entry_set_perm(e.get(), st.st_mode & 07777);
  if (S_ISDIR(st.st_mode)) {
    archive_entry_set_filetype(e.get(), AE_IFDIR);
    return header(e.get(), name);
  }
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    fs::path target = fs::read_symlink(path, ec);
    if (ec) return Error(Code::kInternal, "read the link " + path + ": " + ec.message());
    archive_entry_set_filetype(e.get(), AE_IFLNK);
    archive_entry_copy_symlink(e.get(), target.c_str());
    return header(e.get(), name);
  }
  Fd in(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat now {};
  if (!in || ::fstat(in.get(), &now) != 0 || !S_ISREG(now.st_mode))
    return Error::fromErrno("read " + path);
  archive_entry_set_filetype(e.get(), AE_IFREG);
  archive_entry_set_size(e.get(), now.st_size);
  VESSEL_TRY(header(e.get(), name));
  char buf[1 << 16];
  auto left = static_cast<uint64_t>(now.st_size);
  while (left > 0) {
    ssize_t n = ::read(in.get(), buf, std::min<uint64_t>(sizeof buf, left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error(Code::kInternal, "read " + path + ": it changed while read");
    if (archive_write_data(a_, buf, static_cast<size_t>(n)) != n)
      return Error(Code::kInternal, "write the context tar: " + archiveError(a_));
    left -= static_cast<uint64_t>(n);
  }
  stats.bytes += static_cast<uint64_t>(now.st_size);
  return okStatus();
}

Status TarWriter::addBytes(const std::string& name, const std::string& content) {
  Entry e(archive_entry_new(), &archive_entry_free);
  archive_entry_set_filetype(e.get(), AE_IFREG);
  archive_entry_set_perm(e.get(), 0644);
  archive_entry_set_size(e.get(), static_cast<la_int64_t>(content.size()));
  VESSEL_TRY(header(e.get(), name));
  if (!content.empty() && archive_write_data(a_, content.data(), content.size()) !=
                              static_cast<ssize_t>(content.size()))
    return Error(Code::kInternal, "write the context tar: " + archiveError(a_));
  stats.bytes += content.size();
  return okStatus();
}

}  // namespace

Result<ContextTarStats> writeContextTar(const std::string& dir, int fd,
                                        const std::vector<std::string>& always,
                                        const std::map<std::string, std::string>& extra,
                                        size_t max_entries) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Error(Code::kInvalidArgument, "build context " + dir + " is not a directory");
  IgnoreRules ignore;
  std::string ignore_file = dir + "/.dockerignore";
  if (fs::is_regular_file(fs::symlink_status(ignore_file, ec))) {
    VESSEL_ASSIGN_OR_RETURN(std::string text, readFile(ignore_file));
    ignore = IgnoreRules::parse(text);
  }
  WriteArchive a(archive_write_new(), &archive_write_free);
  if (!a) return Error(Code::kInternal, "write the context tar: out of memory");
  archive_write_set_format_pax_restricted(a.get());  // ustar, pax headers only where needed
  if (archive_write_open_fd(a.get(), fd) != ARCHIVE_OK)
    return Error(Code::kInternal, "write the context tar: " + archiveError(a.get()));
  TarWriter w(a.get());
  const bool prune = !ignore.hasExceptions();
  size_t seen = 0;
  // No follow_directory_symlink: the walk stays in the context.
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++seen > max_entries * 10)
      return Error(Code::kResourceExhausted, "the build context " + dir + " holds too many files");
    std::string rel = it->path().lexically_relative(dir).string();
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0)
      return Error::fromErrno("stat " + it->path().string());
    bool kept = std::find(always.begin(), always.end(), rel) != always.end();
    if (!kept && ignore.excluded(rel)) {
      bool holds_kept = std::any_of(always.begin(), always.end(), [&](const std::string& a) {
        return a.size() > rel.size() && a.compare(0, rel.size(), rel) == 0 && a[rel.size()] == '/';
      });
      if (prune && S_ISDIR(st.st_mode) && !holds_kept) it.disable_recursion_pending();
      continue;
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) continue;
    if (w.stats.entries >= max_entries)
      return Error(Code::kResourceExhausted, "the build context " + dir + " holds more than " +
                                                 std::to_string(max_entries) +
                                                 " entries (list what the build does not need "
                                                 "in .dockerignore)");
    VESSEL_TRY(w.add(it->path().string(), rel, st));
  }
  if (ec) return Error(Code::kInternal, "read the build context " + dir + ": " + ec.message());
  for (const auto& [name, content] : extra) VESSEL_TRY(w.addBytes(name, content));
  if (archive_write_close(a.get()) != ARCHIVE_OK)
    return Error(Code::kInternal, "write the context tar: " + archiveError(a.get()));
  return w.stats;
}

}  // namespace vessel::templates
