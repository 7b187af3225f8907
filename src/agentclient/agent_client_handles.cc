// AgentClient's process and file calls, and the stream handles they return.
#include "agentclient/agent_client.h"
#include "agentclient/agent_client_internal.h"

namespace vessel::agentclient {

using internal::errorFrame;

namespace {

struct ListProcsMsg {
  static constexpr MsgType kType = MsgType::kListProcs;
  template <typename S, typename V>
  static bool visit(S&, V&) {
    return true;
  }
};

Error unexpectedEnd(const char* what) {
  return Error(Code::kUnavailable, std::string(what) + " ended: another client attached");
}

}  // namespace

// --- processes ----------------------------------------------------------------

asio::awaitable<Result<std::unique_ptr<Process>>> AgentClient::startProcess(
    Result<std::shared_ptr<Stream>> s) {
  if (!s.ok()) co_return std::move(s).error();
  auto got = co_await recv(**s);
  if (!got.ok()) {
    // The caller gave up before the process started: it must not run unread.
    cancel(**s);
    co_return std::move(got).error();
  }
  Frame f = std::move(*got);
  if (f.type == MsgType::kError) co_return errorFrame(f);
  auto started = agentproto::decodeMsg<agentproto::ExecStartedMsg>(f.payload);
  if (!started.ok()) co_return std::move(started).error();
  co_return std::make_unique<Process>(shared_from_this(), std::move(*s), started->pid,
                                      started->lost_bytes);
}

asio::awaitable<Result<std::unique_ptr<Process>>> AgentClient::exec(ExecSpec spec) {
  agentproto::ExecMsg m;
  if (!spec.shell.empty()) {
    m.flags |= agentproto::ExecMsg::kShell;
    m.argv = {spec.shell};
  } else {
    m.argv = spec.argv;
  }
  if (m.argv.empty()) co_return Error(Code::kInvalidArgument, "exec: no command");
  if (spec.pty) m.flags |= agentproto::ExecMsg::kPty;
  m.rows = spec.rows;
  m.cols = spec.cols;
  auto ms = spec.timeout.count();
  m.timeout_ms = ms <= 0 ? 0 : static_cast<uint32_t>(std::min<int64_t>(ms, UINT32_MAX));
  m.user = spec.user;
  m.cwd = spec.cwd;
  m.env = spec.env;
  auto op = startProcess(open(internal::kProcess, m));
  auto p = co_await std::move(op);
  if (p.ok() && observer_ && !spec.origin.empty()) noteStart(spec, m, (*p)->pid());
  co_return std::move(p);
}

void AgentClient::noteStart(const ExecSpec& spec, const agentproto::ExecMsg& m, uint32_t pid) {
  CommandNote n;
  n.origin = spec.origin;
  n.argv = spec.shell.empty() ? m.argv : std::vector<std::string>{"/bin/sh", "-c", spec.shell};
  for (const auto& kv : spec.env) n.env_names.push_back(kv.substr(0, kv.find('=')));
  n.user = spec.user;
  n.cwd = spec.cwd;
  n.pty = spec.pty;
  n.pid = pid;
  n.started_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  n.started = std::chrono::steady_clock::now();
  // The observer may drop the last reference to this client: hold one.
  auto self = shared_from_this();
  auto obs = observer_;
  obs->started(n);
  if (commands_.size() < kMaxNotedCommands) commands_[pid] = std::move(n);
}

void AgentClient::noteBytes(uint32_t pid, size_t n, bool in) {
  if (commands_.empty()) return;
  auto it = commands_.find(pid);
  if (it == commands_.end()) return;
  (in ? it->second.bytes_in : it->second.bytes_out) += n;
}

void AgentClient::noteExit(uint32_t pid, const ExitInfo& e) {
  auto it = commands_.find(pid);
  if (it == commands_.end()) return;
  CommandNote n = std::move(it->second);
  commands_.erase(it);
  if (auto obs = observer_) obs->ended(n, e);
}

asio::awaitable<Result<std::unique_ptr<Process>>> AgentClient::attach(uint32_t pid) {
  agentproto::AttachMsg req{pid};
  auto op = startProcess(open(internal::kProcess, req));
  co_return co_await std::move(op);
}

asio::awaitable<Status> AgentClient::signal(uint32_t pid, int sig) {
  agentproto::SignalMsg m = agentproto::SignalMsg{pid, sig};
  auto op = callStatus(internal::kSimple, std::move(m));
  co_return co_await std::move(op);
}

asio::awaitable<Status> AgentClient::resize(uint32_t pid, uint16_t rows, uint16_t cols) {
  agentproto::ResizeMsg m = agentproto::ResizeMsg{pid, rows, cols};
  auto op = callStatus(internal::kSimple, std::move(m));
  co_return co_await std::move(op);
}

asio::awaitable<Result<std::vector<ProcessInfo>>> AgentClient::listProcesses() {
  std::vector<ProcessInfo> out;
  // g++ 12: named arguments, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
  auto each = [this, &out](const Frame& f) -> Status {
    auto m = agentproto::decodeMsg<agentproto::ProcListMsg>(f.payload);
    if (!m.ok()) return std::move(m).error();
    if (out.size() + m->procs.size() > kMaxListEntries)
      return Error(Code::kResourceExhausted, name_ + ": the guest listed more than " +
                                                 std::to_string(kMaxListEntries) + " processes");
    for (auto& p : m->procs)
      out.push_back({p.pid, p.running != 0, p.attached != 0, p.pty != 0, std::move(p.command)});
    return okStatus();
  };
  auto op = callEach(internal::kProcList, ListProcsMsg{}, each);
  Status st = co_await std::move(op);
  if (!st.ok()) co_return std::move(st).error();
  co_return out;
}

asio::awaitable<Result<ExecResult>> AgentClient::run(ExecSpec spec, size_t max_output) {
  auto op = exec(std::move(spec));
  VESSEL_CO_ASSIGN_OR_RETURN(auto p, co_await std::move(op));
  ExecResult r;
  for (;;) {
    VESSEL_CO_ASSIGN_OR_RETURN(ProcessEvent ev, co_await p->next());
    if (ev.kind == ProcessEvent::Kind::kExit) {
      r.exit = ev.exit;
      co_return r;
    }
    std::string& dst = ev.kind == ProcessEvent::Kind::kStdout ? r.out : r.err;
    if (dst.size() + ev.data.size() > max_output)
      co_return Error(Code::kResourceExhausted,
                      "process " + std::to_string(p->pid()) + " printed more than the limit");
    dst += ev.data;
  }
}

Process::Process(std::shared_ptr<AgentClient> c, std::shared_ptr<Stream> s, uint32_t pid,
                 uint64_t lost)
    : c_(std::move(c)), s_(std::move(s)), pid_(pid), lost_(lost) {}

Process::~Process() { detach(); }

void Process::detach() {
  if (done_) return;
  done_ = true;
  c_->cancel(*s_);
}

asio::awaitable<Result<ProcessEvent>> Process::next() {
  if (done_) co_return c_->streamError("process stream already ended");
  auto f = co_await c_->recv(*s_);
  if (!f.ok()) {
    done_ = true;
    co_return std::move(f).error();
  }
  ProcessEvent ev;
  switch (f->type) {
    case MsgType::kStdout:
    case MsgType::kStderr:
      ev.kind =
          f->type == MsgType::kStdout ? ProcessEvent::Kind::kStdout : ProcessEvent::Kind::kStderr;
      ev.data = std::move(f->payload);
      c_->noteBytes(pid_, ev.data.size(), false);
      co_return ev;
    case MsgType::kExit: {
      done_ = true;
      auto m = agentproto::decodeMsg<agentproto::ExitMsg>(f->payload);
      if (!m.ok()) co_return std::move(m).error();
      ev.kind = ProcessEvent::Kind::kExit;
      ev.exit = {m->exited != 0, m->code, m->signal, m->timed_out != 0};
      c_->noteExit(pid_, ev.exit);
      co_return ev;
    }
    case MsgType::kError: done_ = true; co_return errorFrame(*f);
    default: done_ = true; co_return unexpectedEnd("process stream");
  }
}

asio::awaitable<Status> Process::writeStdin(std::string_view data) {
  while (!data.empty()) {
    size_t n = std::min(data.size(), agentproto::kDataChunk);
    VESSEL_CO_TRY(co_await c_->sendData(*s_, MsgType::kStdin, data.substr(0, n)));
    c_->noteBytes(pid_, n, true);
    data.remove_prefix(n);
  }
  co_return okStatus();
}

asio::awaitable<Status> Process::closeStdin() {
  co_return co_await c_->sendData(*s_, MsgType::kStdinClose, "");
}

asio::awaitable<Status> Process::signal(int sig) { co_return co_await c_->signal(pid_, sig); }

asio::awaitable<Status> Process::resize(uint16_t rows, uint16_t cols) {
  co_return co_await c_->resize(pid_, rows, cols);
}

// --- files --------------------------------------------------------------------

asio::awaitable<Result<std::unique_ptr<FileReader>>> AgentClient::readFile(std::string path,
                                                                           uint64_t offset) {
  VESSEL_CO_ASSIGN_OR_RETURN(
      auto s, open(internal::kRead, agentproto::ReadFileMsg{std::move(path), offset}));
  // Wait for the first frame so a missing file is an Error here, not later.
  while (s->inbox.empty() && !s->ended && !failure_) {
    if (Status st = co_await awaitFrame(*s); !st.ok()) {
      cancel(*s);
      co_return std::move(st).error();
    }
  }
  if (failure_) co_return *failure_;
  if (!s->inbox.empty() && s->inbox.front().type == MsgType::kError) {
    Frame f = std::move(s->inbox.front());
    s->inbox.pop_front();
    co_return errorFrame(f);
  }
  co_return std::make_unique<FileReader>(shared_from_this(), std::move(s));
}

FileReader::FileReader(std::shared_ptr<AgentClient> c, std::shared_ptr<Stream> s)
    : c_(std::move(c)), s_(std::move(s)) {}

FileReader::~FileReader() {
  if (!done_) c_->cancel(*s_);
}

asio::awaitable<Result<std::optional<std::string>>> FileReader::read() {
  if (done_) co_return std::optional<std::string>();
  auto f = co_await c_->recv(*s_);
  if (!f.ok()) {
    done_ = true;
    co_return std::move(f).error();
  }
  if (f->type == MsgType::kFileData) co_return std::optional<std::string>(std::move(f->payload));
  done_ = true;
  if (f->type == MsgType::kError) co_return errorFrame(*f);
  co_return std::optional<std::string>();  // Ok: end of file
}

asio::awaitable<Result<std::unique_ptr<FileWriter>>> AgentClient::writeFile(WriteFileOptions o) {
  auto fill = [&](auto& m) {
    m.path = o.path;
    m.mode = o.mode;
    m.uid = o.uid.value_or(agentproto::kNoOwner);
    m.gid = o.gid.value_or(agentproto::kNoOwner);
  };
  Result<std::shared_ptr<Stream>> s = Error(Code::kInternal, "unset");
  if (o.in_place) {
    agentproto::WriteFileInPlaceMsg m;
    fill(m);
    s = open(internal::kWrite, m);
  } else {
    agentproto::WriteFileMsg m;
    fill(m);
    s = open(internal::kWrite, m);
  }
  if (!s.ok()) co_return std::move(s).error();
  co_return std::make_unique<FileWriter>(shared_from_this(), std::move(*s));
}

FileWriter::FileWriter(std::shared_ptr<AgentClient> c, std::shared_ptr<Stream> s)
    : c_(std::move(c)), s_(std::move(s)) {}

FileWriter::~FileWriter() {
  if (!done_) c_->cancel(*s_);
}

asio::awaitable<Status> FileWriter::write(std::string_view data) {
  while (!data.empty()) {
    size_t n = std::min(data.size(), agentproto::kDataChunk);
    VESSEL_CO_TRY(co_await c_->sendData(*s_, MsgType::kFileData, data.substr(0, n)));
    data.remove_prefix(n);
  }
  co_return okStatus();
}

asio::awaitable<Status> FileWriter::finish() {
  Status sent = co_await c_->sendData(*s_, MsgType::kFileEnd, "");
  done_ = true;
  if (!sent.ok()) co_return sent;
  auto f = co_await c_->recv(*s_);
  if (!f.ok()) co_return std::move(f).error();
  if (f->type == MsgType::kError) co_return errorFrame(*f);
  co_return okStatus();
}

asio::awaitable<Result<agentproto::FileStat>> AgentClient::stat(std::string path) {
  auto op = call(internal::kStat, agentproto::StatMsg{std::move(path)});
  VESSEL_CO_ASSIGN_OR_RETURN(auto frames, co_await std::move(op));
  if (frames.size() != 1) co_return Error(Code::kProtocol, name_ + ": stat without a result");
  auto m = agentproto::decodeMsg<agentproto::StatResultMsg>(frames[0].payload);
  if (!m.ok()) co_return std::move(m).error();
  co_return m->stat;
}

asio::awaitable<Status> AgentClient::setXattrs(std::string path, std::string prefix,
                                               std::vector<agentproto::Xattr> attrs) {
  agentproto::SetXattrsMsg m{std::move(path), std::move(prefix), std::move(attrs)};
  auto op = callStatus(internal::kSimple, std::move(m));
  co_return co_await std::move(op);
}

asio::awaitable<Result<std::vector<agentproto::Xattr>>> AgentClient::getXattrs(std::string path,
                                                                               std::string prefix) {
  auto op = call(internal::kXattrs, agentproto::GetXattrsMsg{std::move(path), std::move(prefix)});
  VESSEL_CO_ASSIGN_OR_RETURN(auto frames, co_await std::move(op));
  if (frames.size() != 1) co_return Error(Code::kProtocol, name_ + ": getxattrs without a result");
  auto m = agentproto::decodeMsg<agentproto::XattrsResultMsg>(frames[0].payload);
  if (!m.ok()) co_return std::move(m).error();
  co_return std::move(m->attrs);
}

asio::awaitable<Result<std::vector<agentproto::ListEntry>>> AgentClient::list(std::string path,
                                                                              uint32_t depth) {
  std::vector<agentproto::ListEntry> out;
  std::string what = name_ + ": listing of " + path;
  auto each = [&out, &what](const Frame& f) -> Status {
    auto m = agentproto::decodeMsg<agentproto::ListEntriesMsg>(f.payload);
    if (!m.ok()) return std::move(m).error();
    if (out.size() + m->entries.size() > kMaxListEntries)
      return Error(Code::kResourceExhausted,
                   what + " has more than " + std::to_string(kMaxListEntries) +
                       " entries; list a subdirectory or with a smaller depth");
    for (auto& e : m->entries) out.push_back(std::move(e));
    return okStatus();
  };
  agentproto::ListMsg m{std::move(path), depth};
  auto op = callEach(internal::kList, std::move(m), each);
  Status st = co_await std::move(op);
  if (!st.ok()) co_return std::move(st).error();
  co_return out;
}

asio::awaitable<Status> AgentClient::mkdir(std::string path, uint32_t mode, bool parents) {
  agentproto::MkdirMsg m =
      agentproto::MkdirMsg{std::move(path), mode, static_cast<uint8_t>(parents)};
  auto op = callStatus(internal::kSimple, std::move(m));
  co_return co_await std::move(op);
}

asio::awaitable<Status> AgentClient::remove(std::string path, bool recursive) {
  agentproto::RemoveMsg m = agentproto::RemoveMsg{std::move(path), static_cast<uint8_t>(recursive)};
  auto op = callStatus(internal::kSimple, std::move(m));
  co_return co_await std::move(op);
}

asio::awaitable<Status> AgentClient::rename(std::string from, std::string to) {
  agentproto::RenameMsg m = agentproto::RenameMsg{std::move(from), std::move(to)};
  auto op = callStatus(internal::kSimple, std::move(m));
  co_return co_await std::move(op);
}

asio::awaitable<Result<std::unique_ptr<Watch>>> AgentClient::watch(std::string path,
                                                                   bool recursive) {
  auto opened = recursive ? open(internal::kWatch, agentproto::WatchTreeMsg{std::move(path)})
                          : open(internal::kWatch, agentproto::WatchMsg{std::move(path)});
  VESSEL_CO_ASSIGN_OR_RETURN(auto s, std::move(opened));
  auto w = std::make_unique<Watch>(shared_from_this(), s);
  // The first event (kind 0) says the watch is in place.
  VESSEL_CO_ASSIGN_OR_RETURN(WatchEvent first, co_await w->next());
  if (first.kind != 0)
    co_return Error(Code::kProtocol, name_ + ": watch did not start with its ready event");
  co_return w;
}

Watch::Watch(std::shared_ptr<AgentClient> c, std::shared_ptr<Stream> s)
    : c_(std::move(c)), s_(std::move(s)) {}

Watch::~Watch() {
  if (!done_) c_->cancel(*s_);
}

asio::awaitable<Result<WatchEvent>> Watch::next() {
  if (done_) co_return c_->streamError("watch already ended");
  auto f = co_await c_->recv(*s_);
  if (!f.ok()) {
    // A caller that cancelled its wait leaves the stream going: cancelled
    // for the agent by the destructor, which a failed stream needs not.
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() == asio::cancellation_type::none) done_ = true;
    co_return std::move(f).error();
  }
  if (f->type == MsgType::kWatchEvent) {
    auto m = agentproto::decodeMsg<agentproto::WatchEventMsg>(f->payload);
    if (!m.ok()) co_return std::move(m).error();
    co_return WatchEvent{m->kind, std::move(m->name)};
  }
  done_ = true;
  if (f->type == MsgType::kError) co_return errorFrame(*f);
  co_return c_->streamError("watch ended");
}

}  // namespace vessel::agentclient
