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

// A minute plus one second per MiB: a transfer that slows below that is
// stuck, not slow.
std::chrono::milliseconds transferTimeout(uint64_t bytes) {
  return std::chrono::seconds(60 + bytes / (1 << 20));
}

int upload(const std::string& local, const Remote& dst) {
  struct stat st {};
  if (::stat(local.c_str(), &st) != 0) return report(Error::fromErrno("cp: " + local), 1);
  if (!S_ISREG(st.st_mode))
    return report(Error(Code::kInvalidArgument, "cp: " + local + " is not a regular file"), 1);
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
  // Streamed from the file: memory stays flat whatever its size.
  auto r = s->data.sendFile("PUT", "/v1/files?path=" + queryEscape(path) + "&mode=" + mode, local,
                            "application/octet-stream",
                            transferTimeout(static_cast<uint64_t>(st.st_size)));
  if (!r.ok()) return report(r.error(), 1);
  if (r->status != 201) return report(responseError(*r, "cp to " + dst.id + ":" + path), 1);
  return 0;
}

int download(const Remote& src, const std::string& local) {
  auto s = openSession(src.id, 0, uint64_t{1} << 40);
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
  // Streamed into a file aside and renamed, so a failure leaves no half
  // file behind and memory stays flat.
  std::string tmp = dst + ".vessel-cp." + std::to_string(::getpid());
  auto r = s->data.receiveFile("/v1/files?path=" + queryEscape(src.path), tmp,
                               transferTimeout(static_cast<uint64_t>(client::num(info, "size"))));
  if (!r.ok() || r->status != 200) {
    ::unlink(tmp.c_str());
    return report(r.ok() ? responseError(*r, "cp from " + where) : r.error(), 1);
  }
  if (::chmod(tmp.c_str(), static_cast<mode_t>(client::num(info, "mode") & 0777)) != 0 ||
      ::rename(tmp.c_str(), dst.c_str()) != 0) {
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
