#include "agent/process.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstring>

extern char** environ;

namespace vessel::agent {

using agentproto::Frame;
using agentproto::MsgType;

namespace {

void setNonblock(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

std::vector<char*> cstrs(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Runs in the forked child: only async-signal-safe calls. On failure the
// errno and the failed step go back to the parent over `report`.
[[noreturn]] void childMain(int report, const char* pty_slave, int in, int out, int err,
                            const UserInfo& u, const char* cwd, char** argv, char** envp) {
  auto fail = [&](char step) {
    int e = errno;
    char msg[1 + sizeof e];
    msg[0] = step;
    std::memcpy(msg + 1, &e, sizeof e);
    ssize_t ignored = ::write(report, msg, sizeof msg);
    (void)ignored;
    ::_exit(127);
  };
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
  ::setsid();
  if (pty_slave) {
    int s = ::open(pty_slave, O_RDWR);
    if (s < 0 || ::ioctl(s, TIOCSCTTY, 0) != 0) fail('t');
    in = out = err = s;
  }
  if (::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) fail('d');
  if (::chdir(cwd) != 0) fail('c');
  if (::getuid() != u.uid || ::getgid() != u.gid) {
    if (::setgroups(1, &u.gid) != 0 || ::setgid(u.gid) != 0 || ::setuid(u.uid) != 0) fail('u');
  }
  environ = envp;
  ::execvp(argv[0], argv);
  fail('e');
  ::_exit(127);
}

std::string stepName(char step) {
  switch (step) {
    case 't': return "open terminal";
    case 'd': return "set up stdio";
    case 'c': return "chdir";
    case 'u': return "switch user";
    default: return "exec";
  }
}

}  // namespace

Processes::~Processes() {
  for (auto& [pid, p] : procs_) {
    closeFd(p->out);
    closeFd(p->err);
    closeFd(p->in);
  }
}

void Processes::closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

Proc* Processes::byStream(uint32_t stream) {
  for (auto& [pid, p] : procs_)
    if (p->stream == stream) return p.get();
  return nullptr;
}

// Long because fork and exec are one sequence in one function: what the
// child does between fork and exec must be async-signal-safe and read
// top to bottom (pipes, session, ids, cwd, environment, then exec).
void Processes::exec(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::ExecMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  if (procs_.size() >= kMaxProcesses) evictFinished();
  if (procs_.size() >= kMaxProcesses)
    return ch_.sendError(stream, Error(Code::kResourceExhausted, "too many processes"));
  std::vector<std::string> argv;
  if (m->flags & agentproto::ExecMsg::kShell) {
    if (m->argv.size() != 1)
      return ch_.sendError(stream, Error(Code::kInvalidArgument, "shell exec needs one command"));
    argv = {"/bin/sh", "-c", m->argv[0]};
  } else {
    argv = m->argv;
  }
  if (argv.empty() || argv[0].empty())
    return ch_.sendError(stream, Error(Code::kInvalidArgument, "empty argv"));
  auto u = id_.lookupUser(m->user.empty() ? "user" : m->user);
  if (!u.ok()) return ch_.sendError(stream, u.error());
  std::string cwd = m->cwd.empty() ? u->home : m->cwd;
  bool pty = m->flags & agentproto::ExecMsg::kPty;
  std::vector<std::string> env = id_.processEnv(*u, pty, m->env);

  auto p = std::make_unique<Proc>();
  p->pty = pty;
  for (const auto& a : argv) {
    if (!p->command.empty()) p->command += ' ';
    p->command += a;
    if (p->command.size() > 256) break;
  }
  p->command.resize(std::min<size_t>(p->command.size(), 256));
  int child_in = -1, child_out = -1, child_err = -1;
  std::string slave;
  auto cleanup = [&] {
    for (int fd : {child_in, child_out, child_err})
      if (fd >= 0) ::close(fd);
    closeFd(p->out);
    closeFd(p->err);
    closeFd(p->in);
  };
  if (pty) {
    int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    char name[128];
    if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0 ||
        ::ptsname_r(master, name, sizeof name) != 0) {
      Error e = Error::fromErrno("open pty");
      if (master >= 0) ::close(master);
      return ch_.sendError(stream, e);
    }
    slave = name;
    winsize ws{};
    ws.ws_row = m->rows ? m->rows : 24;
    ws.ws_col = m->cols ? m->cols : 80;
    ::ioctl(master, TIOCSWINSZ, &ws);
    p->out = master;
  } else {
    int a[2], b[2], c[2];
    if (::pipe2(a, O_CLOEXEC) != 0) return ch_.sendError(stream, Error::fromErrno("pipe"));
    child_in = a[0];
    p->in = a[1];
    if (::pipe2(b, O_CLOEXEC) != 0) {
      cleanup();
      return ch_.sendError(stream, Error::fromErrno("pipe"));
    }
    p->out = b[0];
    child_out = b[1];
    if (::pipe2(c, O_CLOEXEC) != 0) {
      cleanup();
      return ch_.sendError(stream, Error::fromErrno("pipe"));
    }
    p->err = c[0];
    child_err = c[1];
  }
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    cleanup();
    return ch_.sendError(stream, Error::fromErrno("pipe"));
  }
  auto cargv = cstrs(argv);
  auto cenv = cstrs(env);
  pid_t pid = ::fork();
  if (pid == 0) {
    childMain(report[1], pty ? slave.c_str() : nullptr, child_in, child_out, child_err, *u,
              cwd.c_str(), cargv.data(), cenv.data());
  }
  int fork_errno = errno;
  ::close(report[1]);
  for (int* fd : {&child_in, &child_out, &child_err}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  if (pid < 0) {
    ::close(report[0]);
    cleanup();
    return ch_.sendError(stream, Error::fromErrno("fork", fork_errno));
  }
  // The report pipe closes on a successful exec (CLOEXEC); a message on it
  // means the child failed before running the program.
  char msg[1 + sizeof(int)];
  ssize_t n;
  do n = ::read(report[0], msg, sizeof msg);
  while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof msg)) {
    int e;
    std::memcpy(&e, msg + 1, sizeof e);
    ::waitpid(pid, nullptr, 0);
    cleanup();
    return ch_.sendError(stream, Error::fromErrno(stepName(msg[0]) + " " + argv[0], e));
  }
  for (int fd : {p->out, p->err, p->in})
    if (fd >= 0) setNonblock(fd);
  p->pid = pid;
  p->stream = stream;
  if (m->timeout_ms)
    p->deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(m->timeout_ms);
  ch_.sendMsg(stream, agentproto::ExecStartedMsg{static_cast<uint32_t>(pid), 0});
  procs_[pid] = std::move(p);
}

void Processes::attach(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::AttachMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  auto it = procs_.find(static_cast<pid_t>(m->pid));
  if (it == procs_.end())
    return ch_.sendError(stream, Error(Code::kNotFound, "no process " + std::to_string(m->pid)));
  Proc& p = *it->second;
  // One reader at a time: the newest attach wins and the old stream ends.
  if (p.stream != 0) ch_.sendOk(p.stream);
  p.stream = stream;
  ch_.sendMsg(stream, agentproto::ExecStartedMsg{m->pid, p.lost});
  p.lost = 0;
}

void Processes::signal(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::SignalMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  auto it = procs_.find(static_cast<pid_t>(m->pid));
  if (it == procs_.end() || it->second->reaped)
    return ch_.sendError(stream,
                         Error(Code::kNotFound, "no running process " + std::to_string(m->pid)));
  if (m->signal < 1 || m->signal >= NSIG)
    return ch_.sendError(stream, Error(Code::kInvalidArgument, "bad signal number"));
  if (::kill(it->second->pid, m->signal) != 0)
    return ch_.sendError(stream, Error::fromErrno("kill " + std::to_string(m->pid)));
  ch_.sendOk(stream);
}

void Processes::resize(uint32_t stream, const Frame& f) {
  auto m = agentproto::decodeMsg<agentproto::ResizeMsg>(f.payload);
  if (!m.ok()) return ch_.sendError(stream, m.error());
  auto it = procs_.find(static_cast<pid_t>(m->pid));
  if (it == procs_.end() || !it->second->pty || it->second->out < 0)
    return ch_.sendError(
        stream, Error(Code::kNotFound, "no process with a terminal " + std::to_string(m->pid)));
  winsize ws{};
  ws.ws_row = m->rows;
  ws.ws_col = m->cols;
  if (::ioctl(it->second->out, TIOCSWINSZ, &ws) != 0)
    return ch_.sendError(stream, Error::fromErrno("resize terminal"));
  ch_.sendOk(stream);
}

void Processes::list(uint32_t stream) {
  agentproto::ProcListMsg m;
  for (auto& [pid, p] : procs_) {
    m.procs.push_back({static_cast<uint32_t>(pid), static_cast<uint8_t>(!p->reaped),
                       static_cast<uint8_t>(p->stream != 0), static_cast<uint8_t>(p->pty),
                       p->command.substr(0, 120)});
  }
  ch_.sendMsg(stream, m);
  ch_.sendOk(stream);
}

bool Processes::onStreamFrame(uint32_t stream, const Frame& f) {
  Proc* p = byStream(stream);
  if (!p) return false;
  switch (f.type) {
    case MsgType::kStdin:
    case MsgType::kStdinClose: {
      int in = p->pty ? p->out : p->in;
      uint32_t cost = agentproto::frameCost(f.payload.size());
      if (in < 0 || p->stdin_close_requested) {
        ch_.grant(stream, cost);  // nobody reads it any more: drop
        break;
      }
      p->stdin_credit_owed += cost;
      if (f.type == MsgType::kStdin) {
        p->stdin_pending += f.payload;
      } else if (p->pty) {
        p->stdin_pending += '\x04';  // EOF for a terminal is ^D at line start
      } else {
        p->stdin_close_requested = true;
      }
      writeStdin(*p);
      break;
    }
    case MsgType::kCredit: {
      auto c = agentproto::decodeMsg<agentproto::CreditMsg>(f.payload);
      if (c.ok()) ch_.addCredit(stream, c->bytes);
      break;
    }
    case MsgType::kCancel:
      detach(*p);
      ch_.sendOk(stream);
      break;
    default: break;
  }
  return true;
}

void Processes::writeStdin(Proc& p) {
  int& in = p.pty ? p.out : p.in;
  while (in >= 0 && !p.stdin_pending.empty()) {
    ssize_t n = ::write(in, p.stdin_pending.data(), p.stdin_pending.size());
    if (n > 0) {
      p.stdin_pending.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // EPIPE: the process closed its stdin; what it did not read is dropped.
    p.stdin_pending.clear();
    if (!p.pty) closeFd(p.in);
  }
  if (p.stdin_pending.empty()) {
    if (p.stream) ch_.grant(p.stream, p.stdin_credit_owed);
    p.stdin_credit_owed = 0;
    if (p.stdin_close_requested && !p.pty) closeFd(p.in);
  }
}

void Processes::append(Proc& p, bool is_err, std::string data) {
  p.buf_bytes += data.size();
  p.buf.push_back({is_err, std::move(data)});
  size_t cap = p.stream ? kDetachedBuffer + kAttachedBuffer : kDetachedBuffer;
  while (p.buf_bytes > cap && !p.buf.empty()) {
    p.buf_bytes -= p.buf.front().data.size();
    p.lost += p.buf.front().data.size();
    p.buf.pop_front();
  }
}

void Processes::readFrom(Proc& p, bool from_err, bool drain) {
  int& fd = from_err ? p.err : p.out;
  size_t total = 0;
  while (fd >= 0) {
    std::string chunk(agentproto::kDataChunk, '\0');
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n > 0) {
      chunk.resize(static_cast<size_t>(n));
      total += chunk.size();
      append(p, from_err, std::move(chunk));
      if (!drain || total >= kDetachedBuffer) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // EOF, or EIO from a pty master whose slave side is gone.
    closeFd(fd);
  }
}

void Processes::detach(Proc& p) { p.stream = 0; }

void Processes::onReaped(pid_t pid, int status) {
  auto it = procs_.find(pid);
  if (it == procs_.end()) return;
  Proc& p = *it->second;
  p.reaped = true;
  p.wait_status = status;
  // Everything the process wrote is in its pipes now; descendants that keep
  // them open do not hold its exit back.
  readFrom(p, false, true);
  readFrom(p, true, true);
  closeFd(p.out);
  closeFd(p.err);
  closeFd(p.in);
  p.finished_seq = ++finish_counter_;
}

void Processes::detachAll() {
  for (auto& [pid, p] : procs_) p->stream = 0;
}

void Processes::killAll() {
  for (auto& [pid, p] : procs_) {
    if (p->reaped) continue;
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    p->reaped = true;
  }
}

void Processes::evictFinished() {
  size_t finished_count = 0;
  for (auto& [pid, p] : procs_)
    if (finished(*p) && !p->stream) ++finished_count;
  while (finished_count > kMaxFinishedKept || (finished_count && procs_.size() >= kMaxProcesses)) {
    auto oldest = procs_.end();
    for (auto it = procs_.begin(); it != procs_.end(); ++it)
      if (finished(*it->second) && !it->second->stream &&
          (oldest == procs_.end() || it->second->finished_seq < oldest->second->finished_seq))
        oldest = it;
    if (oldest == procs_.end()) break;
    procs_.erase(oldest);
    --finished_count;
  }
}

void Processes::poll(PollSet& ps) {
  auto now = std::chrono::steady_clock::now();
  for (auto& [pid, pp] : procs_) {
    Proc* p = pp.get();
    bool may_read = p->stream == 0 || p->buf_bytes < kAttachedBuffer;
    for (bool is_err : {false, true}) {
      int fd = is_err ? p->err : p->out;
      if (fd < 0) continue;
      short ev = may_read ? POLLIN : 0;
      if (!is_err && p->pty && !p->stdin_pending.empty()) ev |= POLLOUT;
      if (ev == 0) continue;
      ps.add(fd, ev, [this, pid = pid, is_err](short rev) {
        auto it = procs_.find(pid);
        if (it == procs_.end()) return;
        Proc& q = *it->second;
        if (rev & POLLOUT) writeStdin(q);
        if (rev & (POLLIN | POLLHUP | POLLERR)) readFrom(q, is_err, false);
      });
    }
    if (p->in >= 0 && !p->stdin_pending.empty()) {
      ps.add(p->in, POLLOUT, [this, pid = pid](short) {
        auto it = procs_.find(pid);
        if (it != procs_.end()) writeStdin(*it->second);
      });
    }
    if (!p->reaped && p->deadline != std::chrono::steady_clock::time_point::max()) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(p->deadline - now).count();
      ps.wakeWithin(static_cast<int>(std::max<long>(0, ms) + 1));
    }
  }
}

void Processes::pump() {
  auto now = std::chrono::steady_clock::now();
  for (auto it = procs_.begin(); it != procs_.end();) {
    Proc& p = *it->second;
    if (!p.reaped && !p.timed_out && now >= p.deadline) {
      // The whole process group: a shell's children must not outlive it.
      ::kill(-p.pid, SIGKILL);
      ::kill(p.pid, SIGKILL);
      p.timed_out = true;
    }
    if (p.stream) {
      while (!p.buf.empty() && ch_.canSend(p.stream, p.buf.front().data.size())) {
        auto& c = p.buf.front();
        ch_.send(c.is_err ? MsgType::kStderr : MsgType::kStdout, p.stream, c.data);
        p.buf_bytes -= c.data.size();
        p.buf.pop_front();
      }
      if (finished(p) && ch_.canSend(p.stream, 16)) {
        agentproto::ExitMsg e;
        e.exited = WIFEXITED(p.wait_status);
        e.code = e.exited ? WEXITSTATUS(p.wait_status) : 0;
        e.signal = WIFSIGNALED(p.wait_status) ? WTERMSIG(p.wait_status) : 0;
        e.timed_out = p.timed_out;
        ch_.sendMsg(p.stream, e);
        ch_.closeStream(p.stream);
        it = procs_.erase(it);
        continue;
      }
    }
    ++it;
  }
  evictFinished();
}

}  // namespace vessel::agent
