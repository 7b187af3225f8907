// vessel volume create|list|get|delete|clone|snapshot|ls|cat|put|mkdir|rm
// (docs/volumes.md): a tenant's volumes and their files through the API.
// Files stream both ways: `cat` writes the file to stdout as it arrives,
// `put` sends a local file (or stdin) as the body.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "base/fd.h"
#include "cmd/vessel/api_common.h"
#include "cmd/vessel/commands.h"
#include "cmd/vessel/data_session.h"

namespace vessel::cli {

namespace json = boost::json;

namespace {

struct VolumeOptions {
  std::string name, other, path, local = "-", mode;
  int64_t size_mib = 0;
  bool force = false, recursive = false, parents = true, quiet = false;
};

std::string volumePath(const std::string& name) { return "/v1/volumes/" + queryEscape(name); }

// Generous: a transfer slower than a MiB a second for an hour is stuck.
constexpr std::chrono::hours kTransferTimeout{1};

int runCreate(const VolumeOptions& o) {
  auto c = apiClient();
  auto r = c.post("/v1/volumes", json::object{{"name", o.name}, {"size_mib", o.size_mib}});
  if (!r.ok()) return fail(r.error());
  std::printf("%s\n", client::str(*r, "name").c_str());
  return 0;
}

int runCopy(const VolumeOptions& o, bool snapshot) {
  auto c = apiClient();
  auto r = c.post(volumePath(o.name) + (snapshot ? ":snapshot" : ":clone"),
                  json::object{{"name", o.other}});
  if (!r.ok()) return fail(r.error());
  std::printf("%s\n", client::str(*r, "name").c_str());
  return 0;
}

int runList(const VolumeOptions& o) {
  auto c = apiClient();
  auto r = c.get("/v1/volumes");
  if (!r.ok()) return fail(r.error());
  const json::value* items = client::field(*r, "volumes");
  if (!o.quiet) std::printf("%-24s %10s  %-4s %s\n", "NAME", "SIZE_MIB", "MODE", "CREATED");
  if (items && items->is_array())
    for (const auto& v : items->as_array()) {
      if (o.quiet) {
        std::printf("%s\n", client::str(v, "name").c_str());
        continue;
      }
      const json::value* ro = client::field(v, "read_only");
      std::printf("%-24s %10lld  %-4s %s\n", client::str(v, "name").c_str(),
                  static_cast<long long>(client::num(v, "size_mib")),
                  ro && ro->is_bool() && ro->as_bool() ? "ro" : "rw",
                  client::str(v, "created_at").c_str());
    }
  return 0;
}

int runGet(const VolumeOptions& o) {
  auto c = apiClient();
  auto r = c.get(volumePath(o.name));
  if (!r.ok()) return fail(r.error());
  std::printf("%s\n", prettyJson(*r).c_str());
  return 0;
}

int runDelete(const VolumeOptions& o) {
  auto c = apiClient();
  auto r = c.del(volumePath(o.name) + (o.force ? "?force=true" : ""));
  if (!r.ok()) return fail(r.error());
  return 0;
}

int runLs(const VolumeOptions& o) {
  auto c = apiClient();
  auto r = c.get(volumePath(o.name) + "/files?path=" + queryEscape(o.path));
  if (!r.ok()) return fail(r.error());
  const json::value* items = client::field(*r, "entries");
  if (items && items->is_array())
    for (const auto& e : items->as_array()) {
      std::string name = client::str(e, "name"), type = client::str(e, "type");
      std::string target = client::str(e, "link_target");
      std::printf("%04llo %10lld %s%s%s\n", static_cast<unsigned long long>(client::num(e, "mode")),
                  static_cast<long long>(client::num(e, "size")), name.empty() ? "/" : name.c_str(),
                  type == "dir" ? "/" : "", target.empty() ? "" : (" -> " + target).c_str());
    }
  return 0;
}

int runCat(const VolumeOptions& o) {
  auto opts = client::optionsFromEnv();
  opts.max_response_bytes = size_t{1} << 40;  // the volume's size bounds it
  client::Client c(opts);
  // Into a file as it arrives: stdout is one (/dev/stdout), never memory.
  auto r = c.receiveFile(volumePath(o.name) + "/files/content?path=" + queryEscape(o.path),
                         "/dev/stdout", kTransferTimeout);
  if (!r.ok()) return fail(r.error());
  if (r->status != 200) return fail(client::errorFromResponse(*r));
  return 0;
}

// Stdin (a pipe has no length to send) goes to a file aside first.
Result<std::string> stdinToFile() {
  std::string tmp =
      (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") + std::string("/vessel-put-XXXXXX");
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return Error::fromErrno("put: a file for stdin");
  Fd out(fd);
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0 || ::write(out.get(), buf, static_cast<size_t>(n)) != n) {
      Error e = Error::fromErrno("put: copy stdin");
      ::unlink(tmp.c_str());
      return e;
    }
  }
  return tmp;
}

int runPut(const VolumeOptions& o) {
  auto c = apiClient();
  std::string target = volumePath(o.name) + "/files/content?path=" + queryEscape(o.path);
  if (!o.mode.empty()) target += "&mode=" + o.mode;
  std::string local = o.local;
  if (local == "-") {
    auto tmp = stdinToFile();
    if (!tmp.ok()) return fail(tmp.error());
    local = *tmp;
  }
  auto r = c.sendFile("PUT", target, local, "application/octet-stream", kTransferTimeout);
  if (o.local == "-") ::unlink(local.c_str());
  if (!r.ok()) return fail(r.error());
  if (r->status != 201) return fail(client::errorFromResponse(*r));
  return 0;
}

int runMkdir(const VolumeOptions& o) {
  auto c = apiClient();
  auto r = c.post(volumePath(o.name) + "/files:mkdir",
                  json::object{{"path", o.path}, {"parents", o.parents}});
  if (!r.ok()) return fail(r.error());
  return 0;
}

int runRm(const VolumeOptions& o) {
  auto c = apiClient();
  auto r = c.del(volumePath(o.name) + "/files?path=" + queryEscape(o.path) +
                 (o.recursive ? "&recursive=true" : ""));
  if (!r.ok()) return fail(r.error());
  return 0;
}

// One subcommand whose callback runs `fn` with the shared options.
CLI::App* sub(CLI::App& parent, const char* name, const char* help,
              std::shared_ptr<VolumeOptions> o, std::function<int()>* run,
              int (*fn)(const VolumeOptions&)) {
  auto* s = parent.add_subcommand(name, help);
  s->callback([o, run, fn] { *run = [o, fn] { return fn(*o); }; });
  return s;
}

}  // namespace

void addVolume(CLI::App& app, std::function<int()>* run) {
  auto* v =
      app.add_subcommand("volume", "volumes: storage that outlives sandboxes (docs/volumes.md)");
  v->require_subcommand(1);
  auto o = std::make_shared<VolumeOptions>();
  auto* create = sub(*v, "create", "make an empty volume; print its name", o, run, runCreate);
  create->add_option("name", o->name, "volume name")->required();
  create->add_option("--size", o->size_mib, "its size, MiB")->required();
  auto* list = sub(*v, "list", "the tenant's volumes", o, run, runList);
  list->add_flag("-q,--quiet", o->quiet, "names only");
  sub(*v, "get", "a volume as JSON, with the bytes used", o, run, runGet)
      ->add_option("name", o->name, "volume name")
      ->required();
  auto* del = sub(*v, "delete", "delete a volume and its files", o, run, runDelete);
  del->add_option("name", o->name, "volume name")->required();
  del->add_flag("--force", o->force, "even while sandboxes mount it");
  auto* clone = sub(*v, "clone", "a writable copy of a volume as it is now", o, run,
                    [](const VolumeOptions& x) { return runCopy(x, false); });
  clone->add_option("name", o->name, "volume name")->required();
  clone->add_option("new", o->other, "the copy's name")->required();
  auto* snap = sub(*v, "snapshot", "a read-only copy of a volume as it is now", o, run,
                   [](const VolumeOptions& x) { return runCopy(x, true); });
  snap->add_option("name", o->name, "volume name")->required();
  snap->add_option("new", o->other, "the snapshot's name")->required();
  auto* ls = sub(*v, "ls", "list a directory of a volume (or stat a file)", o, run, runLs);
  ls->add_option("name", o->name, "volume name")->required();
  ls->add_option("path", o->path, "path in the volume (default /)");
  auto* cat = sub(*v, "cat", "write a volume's file to stdout", o, run, runCat);
  cat->add_option("name", o->name, "volume name")->required();
  cat->add_option("path", o->path, "path in the volume")->required();
  auto* put = sub(*v, "put", "write a file into a volume (atomically)", o, run, runPut);
  put->add_option("name", o->name, "volume name")->required();
  put->add_option("path", o->path, "path in the volume")->required();
  put->add_option("local", o->local, "local file (default -: stdin)");
  put->add_option("--mode", o->mode, "its permission bits, octal (default 0644)");
  auto* mkdir =
      sub(*v, "mkdir", "make a directory (and its parents) in a volume", o, run, runMkdir);
  mkdir->add_option("name", o->name, "volume name")->required();
  mkdir->add_option("path", o->path, "path in the volume")->required();
  auto* rm = sub(*v, "rm", "remove a file or directory of a volume", o, run, runRm);
  rm->add_option("name", o->name, "volume name")->required();
  rm->add_option("path", o->path, "path in the volume")->required();
  rm->add_flag("-r,--recursive", o->recursive, "a directory with what it holds");
}

}  // namespace vessel::cli
