// vessel cp LOCAL ID:PATH | vessel cp ID:PATH LOCAL: one regular file each
// way through the data plane. A destination that is a directory (or ends
// in '/') receives the file under its own name; the file's permission bits
// travel with it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "cmd/vessel/commands.h"
#include "cmd/vessel/data_session.h"

namespace vessel::cli {

namespace json = boost::json;

namespace {

struct Remote {
  std::string id, path;
};

// "sb-123:/tmp/x" -> {sb-123, /tmp/x}; a local path (with or without ':')
// is nullopt. Local paths that look remote can be written ./name.
std::optional<Remote> parseRemote(const std::string& s) {
  auto colon = s.find(':');
  if (colon == std::string::npos || colon == 0 || colon > 64) return std::nullopt;
  for (size_t i = 0; i < colon; ++i) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return std::nullopt;
  }
  return Remote{s.substr(0, colon), s.substr(colon + 1)};
}

std::string baseName(const std::string& p) {
  std::string s = p;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  auto slash = s.find_last_of('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

Error responseError(const client::HttpResponse& r, const std::string& what) {
  return client::errorFromResponse(r).withContext(what);
}

int upload(const std::string& local, const Remote& dst) {
  struct stat st {};
  if (::stat(local.c_str(), &st) != 0) return report(Error::fromErrno("cp: " + local), 1);
  if (!S_ISREG(st.st_mode))
    return report(Error(Code::kInvalidArgument, "cp: " + local + " is not a regular file"), 1);
  std::ifstream in(local, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), {});
  if (!in.good() && !in.eof()) return report(Error::fromErrno("cp: read " + local), 1);
  auto s = openSession(dst.id);
  if (!s.ok()) return report(s.error(), 1);
  std::string path = dst.path.empty() ? "/home/user/" : dst.path;
  if (path.back() == '/') {
    path += baseName(local);
  } else {
    auto r = s->data.request("GET", "/v1/files/stat?path=" + queryEscape(path));
    if (r.ok() && r->status == 200) {
      boost::system::error_code ec;
      auto v = json::parse(r->body, ec);
      if (!ec && client::str(v, "type") == "dir") path += "/" + baseName(local);
    }
  }
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
  auto r = s->data.request("PUT", "/v1/files?path=" + queryEscape(path) + "&mode=" + mode,
                           std::move(data), "application/octet-stream");
  if (!r.ok()) return report(r.error(), 1);
  if (r->status != 201) return report(responseError(*r, "cp to " + dst.id + ":" + path), 1);
  return 0;
}

int download(const Remote& src, const std::string& local) {
  auto s = openSession(src.id, 0, size_t{4} << 30);
  if (!s.ok()) return report(s.error(), 1);
  std::string where = src.id + ":" + src.path;
  auto st = s->data.request("GET", "/v1/files/stat?path=" + queryEscape(src.path));
  if (!st.ok()) return report(st.error(), 1);
  if (st->status != 200) return report(responseError(*st, "cp from " + where), 1);
  boost::system::error_code ec;
  auto info = json::parse(st->body, ec);
  if (ec || client::str(info, "type") != "file")
    return report(Error(Code::kInvalidArgument, "cp: " + where + " is not a regular file"), 1);
  std::string dst = local;
  struct stat lst {};
  if (!dst.empty() &&
      (dst.back() == '/' || (::stat(dst.c_str(), &lst) == 0 && S_ISDIR(lst.st_mode))))
    dst += (dst.back() == '/' ? "" : "/") + baseName(src.path);
  auto r = s->data.request("GET", "/v1/files?path=" + queryEscape(src.path));
  if (!r.ok()) return report(r.error(), 1);
  if (r->status != 200) return report(responseError(*r, "cp from " + where), 1);
  // Written aside and renamed, so a failure leaves no half file behind.
  std::string tmp = dst + ".vessel-cp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                  static_cast<mode_t>(client::num(info, "mode") & 0777));
  if (fd < 0) return report(Error::fromErrno("cp: create " + tmp), 1);
  std::string_view rest = r->body;
  while (!rest.empty()) {
    ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Error e = Error::fromErrno("cp: write " + tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return report(e, 1);
    }
    rest.remove_prefix(static_cast<size_t>(n));
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), dst.c_str()) != 0) {
    Error e = Error::fromErrno("cp: " + dst);
    ::unlink(tmp.c_str());
    return report(e, 1);
  }
  return 0;
}

}  // namespace

void addCp(CLI::App& app, std::function<int()>* run) {
  auto src = std::make_shared<std::string>();
  auto dst = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("cp", "copy a file into or out of a sandbox (ID:PATH)");
  cmd->add_option("src", *src, "LOCAL or ID:PATH")->required();
  cmd->add_option("dst", *dst, "ID:PATH or LOCAL")->required();
  cmd->callback([src, dst, run] {
    *run = [src, dst] {
      auto from = parseRemote(*src);
      auto to = parseRemote(*dst);
      if (from.has_value() == to.has_value())
        return report(Error(Code::kInvalidArgument,
                            "cp: exactly one of the two must be ID:PATH in a sandbox"),
                      2);
      return from ? download(*from, *dst) : upload(*src, *to);
    };
  });
}

}  // namespace vessel::cli
