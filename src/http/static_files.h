#pragma once
// Static files for a browser (vesseld's web console, console/): a
// directory read whole into memory once, when the listener starts, and
// served from there under a URL prefix. Reading it up front keeps file I/O
// off the io thread and makes the set of answerable paths closed: a request
// names a key of a map, never a path on disk, so no `..`, symlink or
// percent-encoding can reach a file outside the directory. No directory is
// listed; the prefix itself is the directory's index.html.
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "http/asset_path.h"
#include "http/router.h"

namespace vessel::http {

struct StaticLimits {
  size_t max_files = 512;
  size_t max_total_bytes = 64u << 20;
  size_t max_depth = 3;  // path segments below the prefix
};

class StaticFiles {
 public:
  struct File {
    std::string content_type;
    std::string body;
  };
  using Headers = std::vector<std::pair<std::string, std::string>>;

  // Every regular file under `dir` whose relative path checkAssetPath
  // accepts (others, symlinks included, are skipped); an error when `dir`
  // is not a directory or holds more than the limits allow.
  static Result<StaticFiles> load(const std::string& dir, StaticLimits limits = {});

  // The file at `rel`, or nullptr ("" is index.html).
  const File* find(std::string_view rel) const;
  size_t size() const { return files_.size(); }

  // GET `prefix` (e.g. "/console"), `prefix`/, and `prefix`/a[/b[/c]] up to
  // the depth limit, each answer (404s too) with `headers` (a
  // Content-Security-Policy, say) and X-Content-Type-Options: nosniff.
  static void install(Router& r, const std::string& prefix,
                      std::shared_ptr<const StaticFiles> files, Headers headers);
  // The answer to GET of `rel` below the prefix, as install()'s routes give it.
  Response serve(const Request& req, std::string_view rel, const Headers& headers) const;

 private:
  std::map<std::string, File, std::less<>> files_;
  StaticLimits limits_;
};

}  // namespace vessel::http
