#include "ops/sandbox_log.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "base/log.h"
#include "ops/events.h"

namespace vessel::ops {

namespace json = boost::json;

struct SandboxLog::Subscription::Waiter {
  explicit Waiter(const asio::any_io_executor& ex) : timer(ex) {}
  std::string sandbox;
  asio::steady_timer timer;
  bool waiting = false;
  bool pending = false;  // an entry came while nobody waited
};

struct SandboxLog::Registry {
  std::multimap<std::string, std::weak_ptr<Subscription::Waiter>> by_sandbox;
  void wake(const std::string& sandbox) {
    auto [b, e] = by_sandbox.equal_range(sandbox);
    for (auto it = b; it != e; ++it)
      if (auto w = it->second.lock()) {
        w->pending = true;
        if (w->waiting) w->timer.cancel();
      }
  }
  void drop(const Subscription::Waiter* w) {
    auto [b, e] = by_sandbox.equal_range(w->sandbox);
    for (auto it = b; it != e; ++it)
      if (auto p = it->second.lock(); !p || p.get() == w) {
        by_sandbox.erase(it);
        return;
      }
  }
};

SandboxLog::SandboxLog(store::Store& store, const WallClock& clock)
    : store_(store), clock_(clock), subs_(std::make_shared<Registry>()) {}

SandboxLog::~SandboxLog() {
  *self_ = nullptr;
  for (auto& [id, weak] : subs_->by_sandbox)
    if (auto w = weak.lock()) w->timer.cancel();
}

SandboxLog::Subscription::~Subscription() = default;

void SandboxLog::append(const std::string& sandbox_id, std::string_view kind, json::object data) {
  store::LogRecord r{0, sandbox_id, std::string(kind), json::serialize(data), clock_.nowMs()};
  if (auto s = store_.appendLog(r); !s.ok()) {
    Logger("ops", sandbox_id).warn("sandbox log: {}", s.error().message());
    return;
  }
  // The bound, every kTrimEvery appends (the first append after a restart
  // trims too: the count starts again at 0).
  int& n = since_trim_[sandbox_id];
  if (n++ % kTrimEvery == 0) {
    if (auto t = store_.trimLogs(sandbox_id, limits_.max_entries); !t.ok())
      Logger("ops", sandbox_id).warn("sandbox log: {}", t.error().message());
  }
  subs_->wake(sandbox_id);
}

void SandboxLog::lifecycle(const std::string& sandbox_id, std::string_view event,
                           json::object fields) {
  json::object data;
  data["event"] = event;
  for (auto& [k, v] : fields) data[k] = std::move(v);
  bool ended = event == "deleted";
  append(sandbox_id, kLogLifecycle, std::move(data));
  if (ended) {
    // Its log grows no more: trim it to the bound now and forget its count.
    (void)store_.trimLogs(sandbox_id, limits_.max_entries);
    since_trim_.erase(sandbox_id);
  }
}

int SandboxLog::collect() {
  auto n = store_.collectLogs(clock_.nowMs() - limits_.retention.count() * 1000);
  if (!n.ok()) {
    Logger("ops").warn("collect sandbox logs: {}", n.error().message());
    return 0;
  }
  return *n;
}

std::unique_ptr<SandboxLog::Subscription> SandboxLog::subscribe(const std::string& sandbox_id,
                                                                const asio::any_io_executor& ex) {
  auto s = std::make_unique<Subscription>();
  s->w_ = std::shared_ptr<Subscription::Waiter>(
      new Subscription::Waiter(ex),
      [reg = std::weak_ptr<Registry>(subs_)](Subscription::Waiter* w) {
        if (auto r = reg.lock()) r->drop(w);
        delete w;
      });
  s->w_->sandbox = sandbox_id;
  subs_->by_sandbox.emplace(sandbox_id, s->w_);
  return s;
}

asio::awaitable<bool> SandboxLog::Subscription::wait(
    std::chrono::steady_clock::time_point deadline) {
  auto w = w_;
  if (w->pending) {
    w->pending = false;
    co_return true;
  }
  w->timer.expires_at(deadline);
  w->waiting = true;
  auto [ec] = co_await w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  (void)ec;  // cancelled (woken, or the log is gone) or expired: `pending` says which
  w->waiting = false;
  bool woken = w->pending;
  w->pending = false;
  co_return woken;
}

namespace {

std::string str(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  if (!v) return "";
  if (v->is_string()) return std::string(v->get_string());
  return json::serialize(*v);
}

// argv as a shell would read it back: words quoted where they need it.
std::string commandText(const json::object& data) {
  std::string out;
  auto* argv = data.if_contains("argv");
  if (!argv || !argv->is_array()) return out;
  for (const auto& a : argv->get_array()) {
    if (!a.is_string()) continue;
    std::string_view w = a.get_string();
    if (!out.empty()) out += ' ';
    bool plain = !w.empty() && w.find_first_not_of(
                                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
                                   "WXYZ0123456789-_./=:,+@%") == w.npos;
    if (plain) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) {
      if (c == '\'')
        out += "'\\''";
      else
        out += c;
    }
    out += '\'';
  }
  if (data.contains("argv_truncated")) out += " …";
  return out;
}

}  // namespace

std::string logMessage(std::string_view kind, const json::object& data) {
  if (kind == kLogConsole) return str(data, "line");
  if (kind == kLogStart) {
    std::string pid = "start command (pid " + str(data, "pid") + ")";
    if (data.contains("lost_bytes"))
      return pid + ": " + str(data, "lost_bytes") + " bytes of output dropped before it was read";
    if (str(data, "event") == "exit")
      return pid + (data.contains("exit_code") ? " exited " + str(data, "exit_code")
                                               : " killed by signal " + str(data, "signal"));
    return (str(data, "stream") == "stderr" ? "stderr: " : "") + str(data, "line");
  }
  if (kind == kLogFile) {
    std::string out = str(data, "op") + " " + str(data, "path");
    if (data.contains("to")) out += " to " + str(data, "to");
    if (data.contains("size")) out += " (" + str(data, "size") + " bytes)";
    return out + " (" + str(data, "who") + ")";
  }
  if (kind == kLogPort) {
    return "port " + str(data, "port") + " from " + str(data, "peer") + ": " +
           str(data, "bytes_in") + " bytes in, " + str(data, "bytes_out") + " out, " +
           str(data, "duration_ms") + " ms (" + str(data, "who") + ")";
  }
  if (kind == kLogEgress) {
    if (data.contains("skipped")) return str(data, "skipped") + " more decisions not logged";
    std::string what = str(data, "name");
    if (what.empty()) what = str(data, "address");
    what += data.contains("qtype") ? " (type " + str(data, "qtype") + ")" : ":" + str(data, "port");
    return str(data, "flow") + " " + what + " " + str(data, "verdict") + " (" +
           str(data, "reason") + ")";
  }
  if (kind == kLogCommand) {
    std::string who = str(data, "who");
    std::string head;
    if (str(data, "phase") == "start") {
      head = "start pid " + str(data, "pid") + " as " + str(data, "user");
      if (!str(data, "cwd").empty()) head += " in " + str(data, "cwd");
    } else {
      head = data.contains("exit_code") ? "exit " + str(data, "exit_code")
                                        : "killed by signal " + str(data, "signal");
      if (data.contains("timed_out")) head += " (timed out)";
      head += " after " + str(data, "duration_ms") + " ms, pid " + str(data, "pid");
    }
    if (!who.empty()) head += " (" + who + ")";
    return head + ": " + commandText(data);
  }
  std::string event = str(data, "event");
  std::string out = event;
  if (event == "created") {
    if (data.contains("forked_from"))
      out += " by a fork of " + str(data, "forked_from");
    else
      out += " from template " + str(data, "template") + " (" + str(data, "from") + ")";
  } else if (event == "forked") {
    out += " into";
    if (auto* c = data.if_contains("copies"); c && c->is_array())
      for (const auto& id : c->get_array())
        if (id.is_string()) out += " " + std::string(id.get_string());
  }
  if (data.contains("error")) out += ": " + str(data, "error");
  return out;
}

bool logIsError(std::string_view kind, const json::object& data) {
  if (kind == kLogStart && str(data, "event") == "exit")
    return data.contains("signal") || str(data, "exit_code") != "0";
  if (kind != kLogLifecycle) return false;
  auto* e = data.if_contains("event");
  return e && e->is_string() && e->get_string() == "failed";
}

json::object logEntryJson(const store::LogRecord& r) {
  json::object o{{"seq", r.seq}, {"time", rfc3339(r.at_ms)}, {"kind", r.kind}};
  json::error_code ec;
  json::value data = json::parse(r.data_json, ec);
  o["data"] = !ec && data.is_object() ? std::move(data) : json::value(json::object());
  return o;
}

}  // namespace vessel::ops
