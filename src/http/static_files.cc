#include "http/static_files.h"

#include <filesystem>

#include "base/fd.h"
#include "http/server.h"

namespace vessel::http {

namespace fs = std::filesystem;

Result<StaticFiles> StaticFiles::load(const std::string& dir, StaticLimits limits) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Error(Code::kNotFound, "static files: " + dir + " is not a directory");
  StaticFiles out;
  out.limits_ = limits;
  size_t total = 0;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
  if (ec) return Error(Code::kUnavailable, "static files: list " + dir + ": " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return Error(Code::kUnavailable, "static files: list " + dir + ": " + ec.message());
    // Not followed: a link could lead out of the directory.
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    std::string rel = it->path().lexically_relative(dir).generic_string();
    if (!checkAssetPath(rel, limits.max_depth).ok()) continue;
    if (out.files_.size() >= limits.max_files)
      return Error(Code::kResourceExhausted, "static files: " + dir + " holds more than " +
                                                 std::to_string(limits.max_files) + " files");
    size_t room = limits.max_total_bytes - total;
    auto body = readFile(it->path().string(), room);
    if (!body.ok())
      return std::move(body).error().withContext(
          "static files: read " + it->path().string() + " (at most " +
          std::to_string(limits.max_total_bytes) + " bytes in all)");
    total += body->size();
    out.files_[rel] = File{std::string(contentTypeFor(rel)), std::move(*body)};
  }
  return out;
}

const StaticFiles::File* StaticFiles::find(std::string_view rel) const {
  if (rel.empty()) rel = "index.html";
  auto it = files_.find(rel);
  return it == files_.end() ? nullptr : &it->second;
}

Response StaticFiles::serve(const Request& req, std::string_view rel,
                            const Headers& headers) const {
  Response res;
  const File* f = nullptr;
  if (rel.empty() || checkAssetPath(rel, limits_.max_depth).ok()) f = find(rel);
  if (!f) {
    res = errorResponse(req,
                        Error(Code::kNotFound, "no such file: " + std::string(rel.substr(0, 128))));
  } else {
    res = Response{status::ok, req.version()};
    res.set(field::content_type, f->content_type);
    // Rebuilt files are read at the next start: a browser asks again.
    res.set(field::cache_control, "no-cache");
    res.keep_alive(req.keep_alive());
    res.body() = f->body;
    res.prepare_payload();
  }
  res.set("X-Content-Type-Options", "nosniff");
  for (const auto& [name, value] : headers) res.set(name, value);
  return res;
}

void StaticFiles::install(Router& r, const std::string& prefix,
                          std::shared_ptr<const StaticFiles> files, Headers headers) {
  r.paramType("asset", [](std::string_view seg) { return checkAssetPath(seg, 1); });
  auto route = [files, headers](size_t depth) {
    return
        [files, headers, depth](const Request& req, const Params& p) -> asio::awaitable<Response> {
          std::string rel;
          for (size_t i = 0; i < depth; ++i) {
            if (i) rel += '/';
            rel += p[std::string(1, static_cast<char>('a' + i))];
          }
          co_return files->serve(req, rel, headers);
        };
  };
  r.get(prefix, route(0));
  r.get(prefix + "/", route(0));
  std::string pattern = prefix;
  for (size_t d = 1; d <= files->limits_.max_depth && d <= 26; ++d) {
    pattern += "/{" + std::string(1, static_cast<char>('a' + d - 1)) + ":asset}";
    r.get(pattern, route(d));
  }
}

}  // namespace vessel::http
