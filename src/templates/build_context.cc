#include "templates/build_context.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/fd.h"
#include "base/split.h"
#include "templates/dockerfile_words.h"

namespace vessel::templates {

namespace fs = std::filesystem;
using dockerfile_words::lineError;
using dockerfile_words::trim;

namespace {

// A path's non-empty segments ("a//b/" is a, b).
std::vector<std::string> segments(std::string_view p) {
  std::vector<std::string> out;
  for (std::string_view seg : splitView(p, '/'))
    if (!seg.empty()) out.emplace_back(seg);
  return out;
}

// `end`: how many of the path's segments are matched (a directory of it).
bool matchFrom(const std::vector<std::string>& pat, size_t pi, const std::vector<std::string>& path,
               size_t si, size_t end) {
  if (pi == pat.size()) return si == end;
  if (pat[pi] == "**") {
    for (size_t k = si; k <= end; ++k)
      if (matchFrom(pat, pi + 1, path, k, end)) return true;
    return false;
  }
  if (si == end) return false;
  if (::fnmatch(pat[pi].c_str(), path[si].c_str(), 0) != 0) return false;
  return matchFrom(pat, pi + 1, path, si + 1, end);
}

// A source or a pattern inside the context: relative, without `..`.
Result<std::string> insideContext(const DockerStep& s, std::string_view src) {
  std::string p = fs::path(std::string(src)).lexically_normal().string();
  while (!p.empty() && p[0] == '/') p.erase(0, 1);
  if (p == "." || p == "./") p.clear();
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (p == ".." || p.rfind("../", 0) == 0)
    return lineError(s.line,
                     "'" + std::string(src).substr(0, 200) + "' is outside the build context");
  return p;
}

bool globbed(std::string_view s) { return s.find_first_of("*?[") != std::string_view::npos; }

// Docker unpacks what it recognises as an archive, by its bytes.
bool archive(std::string_view c) {
  if (c.size() >= 2 && static_cast<unsigned char>(c[0]) == 0x1f &&
      static_cast<unsigned char>(c[1]) == 0x8b)
    return true;  // gzip
  if (c.substr(0, 3) == "BZh") return true;
  if (c.substr(0, 6) == std::string_view("\xfd"
                                         "7zXZ\0",
                                         6))
    return true;
  return c.size() >= 262 && c.substr(257, 5) == "ustar";
}

std::string joinGuest(const std::string& dir, std::string_view name) {
  if (dir.empty() || dir == "/") return "/" + std::string(name);
  return dir + "/" + std::string(name);
}

}  // namespace

IgnoreRules IgnoreRules::parse(std::string_view text) {
  IgnoreRules r;
  for (std::string_view line : splitView(text, '\n')) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    Rule rule;
    if (line[0] == '!') {
      rule.negate = true;
      line.remove_prefix(1);
    }
    std::string p = fs::path(std::string(line)).lexically_normal().string();
    rule.segments = segments(p);
    std::erase(rule.segments, ".");
    if (rule.segments.empty() || r.rules_.size() >= 10000) continue;
    r.rules_.push_back(std::move(rule));
  }
  return r;
}

bool IgnoreRules::excluded(std::string_view rel_path) const {
  std::vector<std::string> path = segments(rel_path);
  bool out = false;
  for (const auto& rule : rules_) {
    bool hit = false;
    // The path itself or one of its directories.
    for (size_t n = 1; n <= path.size() && !hit; ++n) hit = matchFrom(rule.segments, 0, path, 0, n);
    if (hit) out = !rule.negate;
  }
  return out;
}

bool IgnoreRules::hasExceptions() const {
  return std::any_of(rules_.begin(), rules_.end(), [](const Rule& r) { return r.negate; });
}

Result<BuildContext> BuildContext::open(const std::string& dir, ContextLimits limits) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Error(Code::kInvalidArgument, "build context " + dir + " is not a directory");
  BuildContext c;
  c.dir_ = fs::canonical(dir, ec).string();
  if (ec) return Error(Code::kInvalidArgument, "build context " + dir + ": " + ec.message());
  c.limits_ = limits;
  std::string ignore = c.dir_ + "/.dockerignore";
  if (fs::exists(fs::symlink_status(ignore, ec))) {
    if (!fs::is_regular_file(fs::symlink_status(ignore, ec)) ||
        fs::file_size(ignore, ec) > (1 << 20))
      return Error(Code::kInvalidArgument, ignore + ": not a regular file of at most 1 MiB");
    VESSEL_ASSIGN_OR_RETURN(std::string text, readFile(ignore));
    c.ignore_ = IgnoreRules::parse(text);
  }
  return c;
}

Status BuildContext::take(const DockerStep& s, uint64_t bytes) {
  bytes_ += bytes;
  if (++entries_ > limits_.max_entries || bytes_ > limits_.max_bytes)
    return lineError(s.line,
                     "the build context's files "
                     "exceed " +
                         std::to_string(limits_.max_bytes >> 10) + " KiB or " +
                         std::to_string(limits_.max_entries) +
                         " entries (list what the build does not need in .dockerignore)");
  return okStatus();
}

Result<std::vector<std::string>> BuildContext::matches(const DockerStep& s,
                                                       const std::string& src) {
  std::string at = "Dockerfile line " + std::to_string(s.line) + ": ";
  VESSEL_ASSIGN_OR_RETURN(std::string rel, insideContext(s, src));
  if (!globbed(rel)) {
    std::error_code ec;
    auto st = fs::symlink_status(dir_ + "/" + rel, ec);
    if (!fs::exists(st) || (!rel.empty() && ignore_.excluded(rel)))
      return lineError(s.line, "'" + src.substr(0, 200) + "' is not in the build context" +
                                   (fs::exists(st) ? " (.dockerignore excludes it)" : ""));
    return std::vector<std::string>{rel};
  }
  std::vector<std::string> pat = segments(rel), out;
  std::error_code ec;
  size_t seen = 0;
  for (auto it = fs::recursive_directory_iterator(dir_, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++seen > limits_.max_entries * 10)
      return lineError(s.line, "the build context holds too many files to match");
    std::string r = it->path().lexically_relative(dir_).string();
    std::vector<std::string> segs = segments(r);
    if (matchFrom(pat, 0, segs, 0, segs.size()) && !ignore_.excluded(r)) out.push_back(r);
  }
  if (ec) return Error(Code::kInternal, at + "read the build context: " + ec.message());
  std::sort(out.begin(), out.end());
  if (out.empty())
    return lineError(s.line, "no file in the build context matches '" + src.substr(0, 200) + "'");
  return out;
}

Status BuildContext::addFile(const DockerStep& s, const std::string& rel, const std::string& dest,
                             std::vector<BuildStep>& out) {
  std::string at = "Dockerfile line " + std::to_string(s.line) + ": ";
  std::string host = dir_ + "/" + rel;
  Fd fd(::open(host.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return lineError(s.line, "open " + rel + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return lineError(s.line, rel + " is not a regular file");
  VESSEL_TRY(take(s, static_cast<uint64_t>(st.st_size)));
  std::string content(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < content.size()) {
    ssize_t n = ::read(fd.get(), content.data() + got, content.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error(Code::kInternal, at + "read " + rel + ": it changed while read");
    got += static_cast<size_t>(n);
  }
  BuildStep b;
  b.line = s.line;
  b.text = s.text;
  const CopyStep& c = *s.copy;
  if (c.add && archive(content)) {
    b.kind = BuildStep::Kind::kUnpack;
    b.path = dest.size() > 1 && dest.back() == '/' ? dest.substr(0, dest.size() - 1) : dest;
  } else {
    b.kind = BuildStep::Kind::kWrite;
    b.path = dest.back() == '/'
                 ? joinGuest(dest.substr(0, dest.size() - 1), fs::path(rel).filename().string())
                 : dest;
    b.mode = c.chmod.value_or(st.st_mode & 07777);
    b.owner = c.chown;
  }
  b.content = std::move(content);
  out.push_back(std::move(b));
  return okStatus();
}

Status BuildContext::addTree(const DockerStep& s, const std::string& rel, const std::string& dest,
                             std::vector<BuildStep>& out) {
  std::string at = "Dockerfile line " + std::to_string(s.line) + ": ";
  std::string root = rel.empty() ? dir_ : dir_ + "/" + rel;
  std::string into = dest.size() > 1 && dest.back() == '/' ? dest.substr(0, dest.size() - 1) : dest;
  const CopyStep& c = *s.copy;
  auto mkdir = [&](const std::string& path, const fs::path& host) -> Status {
    VESSEL_TRY(take(s, 0));
    std::error_code ec;
    auto perms = static_cast<uint32_t>(fs::status(host, ec).permissions()) & 07777;
    BuildStep b;
    b.kind = BuildStep::Kind::kMkdir;
    b.line = s.line;
    b.text = s.text;
    b.path = path;
    b.mode = c.chmod.value_or(perms);
    b.owner = c.chown;
    out.push_back(std::move(b));
    return okStatus();
  };
  VESSEL_TRY(mkdir(into, root));
  std::vector<fs::path> entries;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (entries.size() > limits_.max_entries)
      return lineError(
          s.line, rel + " holds more than " + std::to_string(limits_.max_entries) + " entries");
    entries.push_back(it->path());
  }
  if (ec) return Error(Code::kInternal, at + "read " + rel + ": " + ec.message());
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries) {
    std::string r = p.lexically_relative(dir_).string();
    if (ignore_.excluded(r)) continue;
    std::string under = p.lexically_relative(root).string();
    std::string guest = joinGuest(into, under);
    auto st = fs::symlink_status(p, ec);
    if (fs::is_symlink(st))
      return lineError(s.line,
                       r + " is a symbolic link: Vessel builds copy files and directories only");
    if (fs::is_directory(st)) {
      VESSEL_TRY(mkdir(guest, p));
    } else if (fs::is_regular_file(st)) {
      VESSEL_TRY(addFile(s, r, guest, out));
    } else {
      return lineError(s.line, r + " is neither a file nor a directory");
    }
  }
  return okStatus();
}

Status BuildContext::addCopy(const DockerStep& s, std::vector<BuildStep>& out) {
  const CopyStep& c = *s.copy;
  std::vector<std::string> rels;
  bool many = c.sources.size() > 1;
  for (const auto& src : c.sources) {
    VESSEL_ASSIGN_OR_RETURN(auto m, matches(s, src));
    many |= globbed(src) && m.size() > 1;
    rels.insert(rels.end(), m.begin(), m.end());
  }
  if (many && c.dest.back() != '/')
    return lineError(s.line,
                     "with more than one source the destination must be a directory ending in /");
  for (const auto& rel : rels) {
    std::error_code ec;
    auto st = fs::symlink_status(rel.empty() ? dir_ : dir_ + "/" + rel, ec);
    if (fs::is_symlink(st))
      return lineError(s.line,
                       rel + " is a symbolic link: Vessel builds copy files and directories only");
    if (fs::is_directory(st)) {
      VESSEL_TRY(addTree(s, rel, c.dest, out));
    } else if (fs::is_regular_file(st)) {
      VESSEL_TRY(addFile(s, rel, c.dest, out));
    } else {
      return lineError(s.line, rel + " is neither a file nor a directory");
    }
  }
  return okStatus();
}

Result<BuildSpec> BuildContext::spec(const DockerPlan& plan, const std::string& name) {
  BuildSpec s;
  s.name = name;
  if (!plan.from_image.empty())
    s.from_image = plan.from_image;
  else
    s.base = plan.from_template;
  for (const auto& d : plan.steps) {
    if (d.copy) {
      VESSEL_TRY(addCopy(d, s.steps));
    } else if (d.run) {
      BuildStep b;
      b.kind = BuildStep::Kind::kRun;
      b.line = d.line;
      b.text = d.text;
      b.argv = d.run->argv;
      b.user = d.user;
      b.workdir = d.workdir;
      b.env = d.env;
      s.steps.push_back(std::move(b));
    }
    if (s.steps.size() > kMaxBuildSteps)
      return Error(Code::kInvalidArgument,
                   "Dockerfile: more than " + std::to_string(kMaxBuildSteps) + " build steps");
  }
  s.env = plan.env;
  s.start_argv = plan.start;
  if (!plan.start.empty()) {
    s.start_user = plan.user;
    s.start_cwd = plan.workdir;
  }
  return s;
}

}  // namespace vessel::templates
