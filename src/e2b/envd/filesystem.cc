// filesystem.Filesystem: Stat, MakeDir, Move, ListDir, Remove, WatchDir and
// the polled watchers, onto the agent's file calls (docs/e2b-envd.md).
#include <algorithm>
#include <array>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/json/serialize.hpp>
#include <ctime>
#include <deque>

#include "agentclient/event_pump.h"
#include "e2b/envd/connect.h"
#include "e2b/envd/services.h"

namespace vessel::e2b::envd {

using agentproto::FileStat;
using agentproto::FileType;
using W = agentproto::WatchEventMsg;

namespace {

std::string ownerName(uint32_t id) {
  if (id == 0) return "root";
  if (id == 1000) return "user";
  return std::to_string(id);
}

// Go's fs.FileMode.String() for the types envd reports.
std::string permissions(const FileStat& st) {
  std::string s;
  auto t = static_cast<FileType>(st.type);
  s += t == FileType::kDir ? 'd' : t == FileType::kSymlink ? 'L' : '-';
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (st.mode & (1u << (8 - i))) ? rwx[i] : '-';
  return s;
}

std::string rfc3339(int64_t ns) {
  time_t sec = static_cast<time_t>(ns / 1000000000);
  int64_t frac = ns % 1000000000;
  if (frac < 0) {
    frac += 1000000000;
    --sec;
  }
  struct tm tm;
  gmtime_r(&sec, &tm);
  char buf[64];
  size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf, n);
  if (frac) {
    char f[16];
    std::snprintf(f, sizeof f, ".%09lld", static_cast<long long>(frac));
    std::string fs(f);
    while (fs.back() == '0') fs.pop_back();
    out += fs;
  }
  return out + "Z";
}

std::string baseName(const std::string& p) {
  if (p == "/") return "/";
  return p.substr(p.find_last_of('/') + 1);
}

const char* typeName(const FileStat& st) {
  switch (static_cast<FileType>(st.type)) {
    case FileType::kFile: return "FILE_TYPE_FILE";
    case FileType::kDir: return "FILE_TYPE_DIRECTORY";
    case FileType::kSymlink: return "FILE_TYPE_SYMLINK";
    default: return "FILE_TYPE_UNSPECIFIED";
  }
}

Result<std::string> pathArg(const json::object& in, const UserInfo& u,
                            std::string_view name = "path") {
  VESSEL_ASSIGN_OR_RETURN(std::string p, stringField(in, name));
  return resolvePath(p, u);
}

// One envd event per bit of an inotify-style kind.
std::vector<const char*> eventTypes(uint32_t kind) {
  std::vector<const char*> out;
  if (kind & W::kCreate) out.push_back("EVENT_TYPE_CREATE");
  if (kind & W::kModify) out.push_back("EVENT_TYPE_WRITE");
  if (kind & W::kDelete) out.push_back("EVENT_TYPE_REMOVE");
  if (kind & (W::kMovedFrom)) out.push_back("EVENT_TYPE_RENAME");
  if (kind & W::kMovedTo) out.push_back("EVENT_TYPE_CREATE");
  if (kind & W::kAttrib) out.push_back("EVENT_TYPE_CHMOD");
  return out;
}

Result<std::pair<std::string, std::shared_ptr<agentclient::Watch>>> noWatch(Error e) { return e; }

}  // namespace

json::object entryInfo(const FileStat& st, const std::string& path) {
  json::object e{{"name", baseName(path)},
                 {"type", typeName(st)},
                 {"path", path},
                 {"size", std::to_string(st.size)},
                 {"mode", st.mode & 07777},
                 {"permissions", permissions(st)},
                 {"owner", ownerName(st.uid)},
                 {"group", ownerName(st.gid)},
                 {"modifiedTime", rfc3339(st.mtime_ns)}};
  if (static_cast<FileType>(st.type) == FileType::kSymlink) {
    // Absolute, as envd reports it: a relative target is from the link's
    // directory.
    std::string target = st.link_target;
    if (!target.empty() && target[0] != '/')
      target = path.substr(0, path.find_last_of('/') + 1) + target;
    auto clean = resolvePath(target, UserInfo{"", 0, 0, "/"});
    e["symlinkTarget"] = clean.ok() ? *clean : st.link_target;
  }
  return e;
}

// Long because it is the dispatch of filesystem.Filesystem's unary methods
// (Stat, MakeDir, Move, ListDir, Remove, the watchers), one case per method.
asio::awaitable<Response> Services::filesystemUnary(const Request& req, std::string method) {
  auto t = target(req);
  if (!t.ok()) co_return unaryError(req, t.error());
  auto body = parseObject(req.body());
  if (!body.ok()) co_return unaryError(req, body.error());
  auto user = co_await lookupUser(*t->agent, t->user);
  if (!user.ok()) co_return unaryError(req, user.error());
  const json::object& in = *body;
  auto& agent = *t->agent;

  if (method == "Stat" || method == "Remove" || method == "MakeDir" || method == "ListDir") {
    auto path = pathArg(in, *user);
    if (!path.ok()) co_return unaryError(req, path.error());
    if (method == "Stat") {
      auto st = co_await agent.stat(*path);
      if (!st.ok()) co_return unaryError(req, fromGuest(st.error()));
      json::object entry = entryInfo(*st, *path);
      json::object md = co_await metadataOf(agent, *path);
      if (!md.empty()) entry["metadata"] = std::move(md);
      co_return unaryOk(req, json::object{{"entry", std::move(entry)}});
    }
    if (method == "Remove") {
      // Like envd's os.RemoveAll: a path that is not there is removed.
      auto st = co_await agent.remove(*path, true);
      if (!st.ok() && fromGuest(st.error()).code() != Code::kNotFound)
        co_return unaryError(req, fromGuest(st.error()));
      agent.noteFile({.origin = "envd", .op = "remove", .path = *path});
      co_return unaryOk(req, json::object());
    }
    if (method == "MakeDir") {
      auto existing = co_await agent.stat(*path);
      if (existing.ok())
        co_return unaryError(req,
                             Error(Code::kAlreadyExists, "directory " + *path + " already exists"));
      if (auto made = co_await ensureDirs(agent, *path, *user); !made.ok())
        co_return unaryError(req, made.error());
      auto st = co_await agent.stat(*path);
      if (!st.ok()) co_return unaryError(req, fromGuest(st.error()));
      agent.noteFile({.origin = "envd", .op = "mkdir", .path = *path});
      co_return unaryOk(req, json::object{{"entry", entryInfo(*st, *path)}});
    }
    // ListDir: depth 0 means 1, as envd.
    uint32_t depth = 1;
    if (auto* d = field(in, "depth"); d && d->is_int64() && d->as_int64() > 0)
      depth = static_cast<uint32_t>(std::min<int64_t>(d->as_int64(), agentproto::kMaxListDepth));
    auto st = co_await agent.stat(*path);
    if (!st.ok()) co_return unaryError(req, fromGuest(st.error()));
    if (static_cast<FileType>(st->type) != FileType::kDir)
      co_return unaryError(req,
                           Error(Code::kInvalidArgument, "path " + *path + " is not a directory"));
    auto listed = co_await agent.list(*path, depth);
    if (!listed.ok()) co_return unaryError(req, fromGuest(listed.error()));
    std::string base = *path == "/" ? "" : *path;
    // Metadata costs a round trip per entry: only for listings of a
    // reasonable size. Indexed as the listing is.
    std::vector<json::object> metadata;
    if (listed->size() <= 1000) {
      metadata.resize(listed->size());
      for (size_t i = 0; i < listed->size(); ++i)
        if (static_cast<FileType>((*listed)[i].stat.type) == FileType::kFile)
          metadata[i] = co_await metadataOf(agent, base + "/" + (*listed)[i].path);
    }
    // Sorting and the JSON of up to 100,000 entries: on the render thread,
    // as the data plane's listings (http::RenderThread).
    auto make = [l = std::move(*listed), md = std::move(metadata), base]() mutable {
      // Sorted by path: the guest's directory order is the filesystem's.
      std::vector<size_t> order(l.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(),
                [&l](size_t a, size_t b) { return l[a].path < l[b].path; });
      json::array entries;
      entries.reserve(l.size());
      for (size_t i : order) {
        json::object entry = entryInfo(l[i].stat, base + "/" + l[i].path);
        if (i < md.size() && !md[i].empty()) entry["metadata"] = std::move(md[i]);
        entries.push_back(std::move(entry));
      }
      return json::serialize(json::object{{"entries", std::move(entries)}});
    };
    std::string body = co_await render.run(std::move(make));
    co_return unaryOkBody(req, std::move(body));
  }
  if (method == "Move") {
    auto from = pathArg(in, *user, "source");
    auto to = pathArg(in, *user, "destination");
    if (!from.ok()) co_return unaryError(req, from.error());
    if (!to.ok()) co_return unaryError(req, to.error());
    auto st = co_await agent.rename(*from, *to);
    if (!st.ok()) co_return unaryError(req, fromGuest(st.error()));
    agent.noteFile({.origin = "envd", .op = "rename", .path = *from, .to = *to});
    auto s2 = co_await agent.stat(*to);
    if (!s2.ok()) co_return unaryError(req, fromGuest(s2.error()));
    // Metadata lives in xattrs, which a rename carries along.
    json::object entry = entryInfo(*s2, *to);
    json::object md = co_await metadataOf(agent, *to);
    if (!md.empty()) entry["metadata"] = std::move(md);
    co_return unaryOk(req, json::object{{"entry", std::move(entry)}});
  }
  if (method == "CreateWatcher") {
    auto path = pathArg(in, *user);
    if (!path.ok()) co_return unaryError(req, path.error());
    bool recursive = false;
    if (auto* r = field(in, "recursive"); r && r->is_bool()) recursive = r->as_bool();
    // Polled watchers live until removed (or their sandbox ends): a client
    // that never removes them is bounded per sandbox and per tenant.
    if (auto room = roomForWatcher(t->sandbox_id); !room.ok())
      co_return unaryError(req, room.error());
    auto w = co_await agent.watch(*path, recursive);
    if (!w.ok()) co_return unaryError(req, fromGuest(w.error()));
    auto watcher = std::make_shared<Watcher>();
    watcher->sandbox_id = t->sandbox_id;
    watcher->tenant = tenantOf(t->sandbox_id);
    watcher->dir = *path;
    watcher->watch = std::shared_ptr<agentclient::Watch>(std::move(*w));
    std::string id = "w" + std::to_string(next_watcher++);
    watchers[id] = watcher;
    // Its events queued as they come (agentclient/event_pump.h reads them).
    auto queue = [this, watcher](
                     agentclient::StreamItem<agentclient::WatchEvent> ev) -> asio::awaitable<bool> {
      // Freed with its sandbox: nothing more is kept, and the watch (with
      // the agent's stream) goes with the pump.
      if (watcher->dropped) co_return false;
      if (ev.error) {
        watcher->failed = true;
        co_return false;
      }
      for (const char* type : eventTypes(ev.value.kind))
        queueEvent(*watcher, json::object{{"name", ev.value.name}, {"type", type}});
      co_return true;
    };
    asio::co_spawn(
        io, agentclient::pumpEvents<agentclient::WatchEvent>(watcher->watch, std::move(queue)),
        asio::bind_cancellation_slot(watcher->stop->slot(), asio::detached));
    co_return unaryOk(req, json::object{{"watcherId", id}});
  }
  if (method == "GetWatcherEvents" || method == "RemoveWatcher") {
    auto id = stringField(in, "watcherId", "watcher_id");
    if (!id.ok()) co_return unaryError(req, id.error());
    auto it = watchers.find(*id);
    if (it == watchers.end() || it->second->sandbox_id != t->sandbox_id)
      co_return unaryError(req, Error(Code::kNotFound, "watcher " + *id + " not found"));
    if (method == "RemoveWatcher") {
      dropWatcher(it);
      co_return unaryOk(req, json::object());
    }
    auto w = it->second;
    json::array events;
    while (!w->events.empty()) {
      events.push_back(std::move(w->events.front()));
      w->events.pop_front();
    }
    w->bytes = 0;
    if (events.empty() && w->failed) {
      dropWatcher(it);
      co_return unaryError(req, Error(Code::kUnavailable, "watcher's sandbox stream was lost"));
    }
    co_return unaryOk(req, json::object{{"events", std::move(events)}});
  }
  co_return unaryError(req,
                       Error(Code::kNotFound, "no such method filesystem.Filesystem/" + method));
}

asio::awaitable<std::optional<Response>> Services::watchDir(const Request& req,
                                                            beast::tcp_stream& stream) {
  if (req.method() != http::verb::post)
    co_return http::methodNotAllowed(req, "/filesystem.Filesystem/WatchDir", "POST");
  auto t = target(req);
  if (!t.ok()) co_return streamError(req, t.error());
  auto msg = singleRequestMessage(req.body());
  if (!msg.ok()) co_return streamError(req, msg.error());
  auto body = parseObject(*msg);
  if (!body.ok()) co_return streamError(req, body.error());
  auto user = co_await lookupUser(*t->agent, t->user);
  if (!user.ok()) co_return streamError(req, user.error());
  auto path = pathArg(*body, *user);
  if (!path.ok()) co_return streamError(req, path.error());
  bool recursive = false;
  if (auto* r = field(*body, "recursive"); r && r->is_bool()) recursive = r->as_bool();
  // allowNetworkMounts needs nothing: a sandbox's filesystems are local.
  bool include_entry = false;
  if (auto* r = field(*body, "includeEntry", "include_entry"); r && r->is_bool())
    include_entry = r->as_bool();
  auto deadline = connectTimeout(req);
  if (!deadline.ok()) co_return streamError(req, deadline.error());
  auto keepalive = keepaliveInterval(req);
  auto st = co_await t->agent->stat(*path);
  if (!st.ok()) co_return streamError(req, fromGuest(st.error()));
  if (static_cast<FileType>(st->type) != FileType::kDir)
    co_return streamError(req,
                          Error(Code::kInvalidArgument, "path " + *path + " is not a directory"));
  auto w = co_await t->agent->watch(*path, recursive);
  if (!w.ok()) co_return streamError(req, fromGuest(w.error()));
  std::shared_ptr<agentclient::Watch> watch(std::move(*w));

  // The watch's events through a channel, so that the client going away,
  // keepalives and the deadline are awaited together; stopped when the
  // stream ends: on a quiet directory the pump would otherwise hold the
  // watch (and the agent's stream) until the sandbox ends.
  agentclient::EventStream<agentclient::WatchEvent> events(io, std::move(watch), 64);

  StreamSpec spec;
  spec.first = json::object{{"start", json::object()}};
  spec.keepalive = json::object{{"keepalive", json::object()}};
  spec.keepalive_interval = keepalive;
  spec.deadline = *deadline;
  spec.deadline_message = "watch deadline exceeded";
  auto r = co_await serveStream(io, req, stream, spec, [&]() -> asio::awaitable<StreamStep> {
    auto item = co_await events.next();
    StreamStep step;
    if (item.error) {
      step.kind = StreamStep::Kind::kCut;
      co_return step;
    }
    // The entry where it still exists (not after a remove or a rename away).
    std::optional<json::object> entry;
    if (include_entry) {
      std::string full = (*path == "/" ? "" : *path) + "/" + item.value.name;
      if (auto st = co_await t->agent->stat(full); st.ok()) entry = entryInfo(*st, full);
    }
    for (const char* type : eventTypes(item.value.kind)) {
      json::object fe{{"name", item.value.name}, {"type", type}};
      if (entry) fe["entry"] = *entry;
      step.messages.push_back(json::object{{"filesystem", std::move(fe)}});
    }
    co_return step;
  });
  events.stop();
  co_return r;
}

}  // namespace vessel::e2b::envd
