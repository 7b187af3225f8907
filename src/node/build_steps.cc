#include "node/build_steps.h"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <utility>

#include "base/split.h"
#include "base/utf8.h"

namespace vessel::node {

namespace fs = std::filesystem;

namespace {

using templates::BuildStep;

std::string where(const BuildStep& s) {
  return s.line ? "line " + std::to_string(s.line) + " (" + s.text + ")" : s.text;
}

asio::awaitable<Result<std::string>> guestFile(agentclient::AgentClient& a, std::string path) {
  auto r = co_await a.readFile(path);
  if (!r.ok()) co_return std::move(r).error();
  std::string out;
  for (;;) {
    auto c = co_await (*r)->read();
    if (!c.ok()) co_return std::move(c).error();
    if (!*c) break;
    out += **c;
    if (out.size() > (4 << 20))
      co_return Error(Code::kResourceExhausted, path + " larger than 4 MiB");
  }
  co_return out;
}

// g++ 12 cannot keep an array in a coroutine's frame (CONTRIBUTING's rules).
std::string octal(uint32_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%o", mode & 07777);
  return buf;
}

// An argv built outside the coroutine: g++ 12 miscompiles a braced list
// (its backing array) held across a co_await.
std::vector<std::string> argv3(std::string a, std::string b, std::string c) {
  return {std::move(a), std::move(b), std::move(c)};
}

std::optional<uint32_t> number(std::string_view s) {
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// The guest's accounts, read once per build and only if a name is used.
class Accounts {
 public:
  explicit Accounts(agentclient::AgentClient& a) : a_(a) {}

  // user[:group] as ids: a user alone takes its primary group, as docker's --chown does.
  asio::awaitable<Result<std::pair<uint32_t, uint32_t>>> owner(const std::string& spec) {
    std::string u = spec.substr(0, spec.find(':'));
    std::optional<std::string> g;
    if (auto c = spec.find(':'); c != std::string::npos) g = spec.substr(c + 1);
    std::optional<uint32_t> uid = number(u), gid;
    if (g) gid = number(*g);
    if (!uid || (!gid && (!g || !g->empty()))) VESSEL_CO_TRY(co_await load());
    if (!uid) {
      auto it = users_.find(u);
      if (it == users_.end())
        co_return Error(Code::kInvalidArgument, "no user '" + u + "' in the image's /etc/passwd");
      uid = it->second.first;
      if (!g) gid = it->second.second;
    }
    if (g && !gid) {
      auto it = groups_.find(*g);
      if (it == groups_.end())
        co_return Error(Code::kInvalidArgument, "no group '" + *g + "' in the image's /etc/group");
      gid = it->second;
    }
    if (!gid) {
      // A numeric user alone: its account's group if it has one, else its own number.
      gid = *uid;
      for (const auto& [name, ids] : users_)
        if (ids.first == *uid) gid = ids.second;
    }
    co_return std::make_pair(*uid, *gid);
  }

 private:
  asio::awaitable<Status> load() {
    if (loaded_) co_return okStatus();
    loaded_ = true;
    auto pw = co_await guestFile(a_, "/etc/passwd");
    if (pw.ok()) read(*pw, true);
    auto gr = co_await guestFile(a_, "/etc/group");
    if (gr.ok()) read(*gr, false);
    co_return okStatus();
  }
  void read(const std::string& text, bool passwd) {
    for (std::string_view line : splitView(text, '\n')) {
      std::vector<std::string_view> f = splitView(line, ':');
      if (passwd && f.size() >= 4) {
        auto uid = number(f[2]), gid = number(f[3]);
        if (uid && gid) users_.emplace(std::string(f[0]), std::make_pair(*uid, *gid));
      } else if (!passwd && f.size() >= 3) {
        if (auto gid = number(f[2])) groups_.emplace(std::string(f[0]), *gid);
      }
    }
  }

  agentclient::AgentClient& a_;
  bool loaded_ = false;
  std::map<std::string, std::pair<uint32_t, uint32_t>> users_;
  std::map<std::string, uint32_t> groups_;
};

// One build's log: output split into lines per stream, sent a chunk's
// complete lines at a time, bounded in bytes; the last lines kept for a
// failing step's error.
class StepLog {
 public:
  explicit StepLog(const BuildLog& log) : log_(log) {}

  void start(unsigned step, unsigned line, const std::string& text) {
    step_ = step;
    line_ = line;
    tail_.clear();
    started_ = Clock::now();
    emit("step", text, {});
  }
  // The instruction's result came from the build cache: nothing ran.
  void cached() { emit("cached", "", {}); }
  void done() {
    flush();
    BuildLogEntry e = entry("done");
    e.seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    if (log_) log_(e);
  }
  void output(bool err, std::string_view data) {
    std::string& partial = err ? err_ : out_;
    partial += data;
    std::vector<std::string> lines;
    size_t p = 0;
    for (size_t nl; (nl = partial.find('\n', p)) != std::string::npos; p = nl + 1)
      lines.push_back(partial.substr(p, nl - p));
    partial.erase(0, p);
    // A line that never ends is logged in pieces rather than held.
    if (partial.size() > kMaxLine) {
      lines.push_back(partial);
      partial.clear();
    }
    send(err, std::move(lines));
  }
  void flush() {
    if (!out_.empty()) send(false, {std::exchange(out_, {})});
    if (!err_.empty()) send(true, {std::exchange(err_, {})});
  }
  std::string tail() const {
    std::string t;
    for (const auto& l : tail_) t += (t.empty() ? "" : "\n") + l;
    return t;
  }

 private:
  static constexpr size_t kMaxLine = 4096;
  static constexpr size_t kTail = 20;

  BuildLogEntry entry(const char* kind) const {
    BuildLogEntry e;
    e.step = step_;
    e.line = line_;
    e.kind = kind;
    return e;
  }
  void emit(const char* kind, const std::string& text, std::vector<std::string> lines) {
    if (!log_) return;
    BuildLogEntry e = entry(kind);
    e.text = text;
    e.lines = std::move(lines);
    log_(e);
  }
  void send(bool err, std::vector<std::string> lines) {
    for (auto& l : lines) {
      if (l.size() > kMaxLine) l.resize(kMaxLine);
      l = toValidUtf8(l);  // the log goes out as JSON
      tail_.push_back(l);
      if (tail_.size() > kTail) tail_.erase(tail_.begin());
    }
    if (lines.empty() || over_) return;
    size_t bytes = 0;
    for (const auto& l : lines) bytes += l.size() + 1;
    if (bytes_ + bytes > templates::kMaxBuildLogBytes) {
      over_ = true;
      lines = {"[further output is not logged: the build's log holds " +
               std::to_string(templates::kMaxBuildLogBytes >> 20) + " MiB]"};
    }
    bytes_ += bytes;
    emit(err ? "stderr" : "stdout", "", std::move(lines));
  }

  const BuildLog& log_;
  unsigned step_ = 0, line_ = 0;
  Clock::time_point started_;
  std::string out_, err_;
  std::vector<std::string> tail_;
  size_t bytes_ = 0;
  bool over_ = false;
};

asio::awaitable<Result<agentclient::ExecResult>> runArgv(agentclient::AgentClient& a,
                                                         std::vector<std::string> argv,
                                                         Clock::time_point deadline) {
  agentclient::ExecSpec e;
  e.argv = std::move(argv);
  e.user = "root";
  e.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (e.timeout.count() <= 0) co_return Error(Code::kDeadlineExceeded, "the build's time is up");
  co_return co_await a.run(e, 1 << 20);
}

Status exitStatus(const BuildStep& s, const agentclient::ExecResult& r, std::string_view what) {
  if (r.exit.exited && r.exit.code == 0) return okStatus();
  std::string how = r.exit.timed_out ? "ran out of the build's time"
                    : r.exit.exited  ? "exit " + std::to_string(r.exit.code)
                                     : "killed by signal " + std::to_string(r.exit.signal);
  std::string tail = tailLines(r.out + (r.out.empty() || r.err.empty() ? "" : "\n") + r.err, 20);
  return Error(Code::kFailedPrecondition, std::string(what) + " at " + where(s) + " failed (" +
                                              how + ")" + (tail.empty() ? "" : ":\n" + tail));
}

asio::awaitable<Status> writeGuest(agentclient::AgentClient& a, const std::string& path,
                                   const std::string& content, uint32_t mode,
                                   std::optional<std::pair<uint32_t, uint32_t>> owner) {
  VESSEL_CO_TRY(co_await a.mkdir(fs::path(path).parent_path().string(), 0755, true));
  agentclient::WriteFileOptions wo;
  wo.path = path;
  wo.mode = mode;
  if (owner) {
    wo.uid = owner->first;
    wo.gid = owner->second;
  }
  auto w = co_await a.writeFile(wo);
  if (!w.ok()) co_return std::move(w).error();
  VESSEL_CO_TRY(co_await (*w)->write(content));
  co_return co_await (*w)->finish();
}

// Long because each kind of step is a few lines and they share the
// accounts, the counter for progress and the deadline.
asio::awaitable<Status> runStep(agentclient::AgentClient& a, const BuildStep& s, Accounts& accounts,
                                StepLog& log, size_t index, Clock::time_point deadline) {
  std::optional<std::pair<uint32_t, uint32_t>> owner;
  if (!s.owner.empty()) {
    auto o = co_await accounts.owner(s.owner);
    if (!o.ok()) co_return std::move(o).error().withContext(where(s));
    owner = *o;
  }
  switch (s.kind) {
    case BuildStep::Kind::kRun: {
      if (!s.workdir.empty()) {
        auto m = co_await a.mkdir(s.workdir, 0755, true);
        if (!m.ok()) co_return std::move(m).error().withContext(where(s) + ": WORKDIR");
      }
      agentclient::ExecSpec e;
      e.argv = s.argv;
      e.user = s.user.substr(0, s.user.find(':'));
      e.cwd = s.workdir;
      e.env = s.env;
      e.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (e.timeout.count() <= 0)
        co_return Error(Code::kDeadlineExceeded, "the build's time is up before " + where(s));
      auto p = co_await a.exec(e);
      if (!p.ok()) co_return std::move(p).error().withContext(where(s));
      agentclient::ExecResult r;
      for (;;) {
        auto ev = co_await (*p)->next();
        if (!ev.ok()) co_return std::move(ev).error().withContext(where(s));
        if (ev->kind == agentclient::ProcessEvent::Kind::kExit) {
          r.exit = ev->exit;
          break;
        }
        log.output(ev->kind == agentclient::ProcessEvent::Kind::kStderr, ev->data);
      }
      log.flush();
      r.out = log.tail();
      co_return exitStatus(s, r, "RUN");
    }
    case BuildStep::Kind::kMkdir: {
      auto m = co_await a.mkdir(s.path, s.mode, true);
      if (!m.ok()) co_return std::move(m).error().withContext(where(s) + ": mkdir " + s.path);
      // The agent's mkdir is under PID 1's umask (022): what it strips is set again.
      if ((s.mode & 07022) != 0) {
        std::vector<std::string> chmod = argv3("chmod", octal(s.mode), s.path);
        auto c = co_await runArgv(a, std::move(chmod), deadline);
        if (!c.ok()) co_return std::move(c).error().withContext(where(s));
        VESSEL_CO_TRY(exitStatus(s, *c, "chmod " + s.path));
      }
      if (owner) {
        std::vector<std::string> chown = argv3(
            "chown", std::to_string(owner->first) + ":" + std::to_string(owner->second), s.path);
        auto r = co_await runArgv(a, std::move(chown), deadline);
        if (!r.ok()) co_return std::move(r).error().withContext(where(s));
        co_return exitStatus(s, *r, "chown " + s.path);
      }
      co_return okStatus();
    }
    case BuildStep::Kind::kWrite: {
      auto w = co_await writeGuest(a, s.path, s.content, s.mode, owner);
      if (!w.ok()) co_return std::move(w).error().withContext(where(s) + ": write " + s.path);
      co_return okStatus();
    }
    case BuildStep::Kind::kUnpack: {
      std::string tmp = "/tmp/.vessel-add-" + std::to_string(index);
      auto w = co_await writeGuest(a, tmp, s.content, 0600, std::nullopt);
      if (!w.ok()) co_return std::move(w).error().withContext(where(s) + ": write " + tmp);
      auto m = co_await a.mkdir(s.path, 0755, true);
      if (!m.ok()) co_return std::move(m).error().withContext(where(s) + ": mkdir " + s.path);
      std::vector<std::string> tar = argv3("tar", "-xf", tmp);
      tar.push_back("-C");
      tar.push_back(s.path);
      auto r = co_await runArgv(a, std::move(tar), deadline);
      (void)co_await a.remove(tmp);
      if (!r.ok()) co_return std::move(r).error().withContext(where(s) + ": the image's tar");
      co_return exitStatus(s, *r, "unpacking into " + s.path);
    }
  }
  co_return okStatus();
}

}  // namespace

std::string tailLines(std::string_view out, size_t lines) {
  while (!out.empty() && out.back() == '\n') out.remove_suffix(1);
  size_t p = out.size();
  for (size_t n = 0; n < lines; ++n) {
    size_t nl = p == 0 ? std::string_view::npos : out.rfind('\n', p - 1);
    if (nl == std::string_view::npos) {
      p = 0;
      break;
    }
    p = nl;
  }
  std::string_view t = out.substr(p);
  if (!t.empty() && t.front() == '\n') t.remove_prefix(1);
  if (t.size() > 4000) t = t.substr(t.size() - 4000);
  return std::string(t);
}

std::vector<InstructionRange> instructionRanges(const std::vector<templates::BuildStep>& steps) {
  std::vector<InstructionRange> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    // Steps of one instruction share its line; a step without one stands alone.
    if (out.empty() || steps[i].line == 0 || steps[i].line != steps[i - 1].line)
      out.push_back({i, i});
    out.back().end = i + 1;
  }
  return out;
}

asio::awaitable<Status> runBuildSteps(agentclient::AgentClient& a,
                                      const std::vector<templates::BuildStep>& steps,
                                      const Progress& progress, const BuildLog& log,
                                      Clock::time_point deadline, const StepRun& run) {
  Accounts accounts(a);
  StepLog slog(log);
  std::vector<InstructionRange> ranges = instructionRanges(steps);
  size_t n = steps.size();
  for (size_t k = 0; k < ranges.size(); ++k) {
    const auto& first = steps[ranges[k].begin];
    // One progress line and one log step per instruction, not per file a COPY writes.
    progress("step " + std::to_string(ranges[k].begin + 1) + "/" + std::to_string(n) + ": " +
                 where(first),
             35 + static_cast<int>(30 * ranges[k].begin / std::max<size_t>(1, n)));
    slog.start(static_cast<unsigned>(k + 1), first.line, first.text);
    if (k < run.skip) {
      slog.cached();
      continue;
    }
    for (size_t i = ranges[k].begin; i < ranges[k].end; ++i)
      VESSEL_CO_TRY(co_await runStep(a, steps[i], accounts, slog, i, deadline));
    slog.done();
    if (run.checkpoint) VESSEL_CO_TRY(co_await run.checkpoint(k));
  }
  co_return okStatus();
}

}  // namespace vessel::node
