// vessel exec [-i] [-t] [--user NAME] [--env K=V]... [--cwd DIR] ID -- CMD ARGS...
//
// The command's output arrives as the data plane's Server-Sent Events on
// this thread; with -i or -t a second thread forwards our stdin and window
// size changes to the process by id, on its own connection per request.
#include "cmd/vessel/exec.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <thread>

#include "cmd/vessel/commands.h"
#include "cmd/vessel/data_session.h"

namespace vessel::cli {

namespace json = boost::json;

namespace {

std::string unbase64(const std::string& s) {
  if (s.empty()) return "";
  std::string out(s.size() / 4 * 3 + 3, '\0');
  // SAFETY: EVP_DecodeBlock writes at most 3 bytes per 4 input characters.
  int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  if (n < 0) return "";
  size_t pad = s.size() >= 2 && s[s.size() - 2] == '=' ? 2 : (s.back() == '=' ? 1 : 0);
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

bool writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Our terminal in raw mode for the life of the object (a remote pty does
// the line editing and echo).
class RawTerminal {
 public:
  explicit RawTerminal(int fd) : fd_(fd) {
    if (!::isatty(fd) || ::tcgetattr(fd, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    active_ = ::tcsetattr(fd, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) ::tcsetattr(fd_, TCSANOW, &saved_);
  }

 private:
  int fd_;
  termios saved_{};
  bool active_ = false;
};

bool windowSize(uint16_t* rows, uint16_t* cols) {
  winsize ws{};
  for (int fd : {1, 0, 2})
    if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
      *rows = ws.ws_row;
      *cols = ws.ws_col;
      return true;
    }
  return false;
}

// Forwards stdin (with -i) and SIGWINCH (with -t) until told to stop
// through `wake`. Failures are not fatal: the output stream decides how the
// command ends.
void forwardInput(client::ClientOptions opts, uint32_t pid, bool stdin_on, bool pty, int sigfd,
                  int wake) {
  client::Client c(std::move(opts));
  std::string base = "/v1/processes/" + std::to_string(pid);
  std::vector<char> buf(64 * 1024);
  for (;;) {
    pollfd fds[3] = {{wake, POLLIN, 0}, {stdin_on ? 0 : -1, POLLIN, 0}, {sigfd, POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents) return;
    if (fds[2].revents & POLLIN) {
      signalfd_siginfo si;
      (void)!::read(sigfd, &si, sizeof si);
      uint16_t rows, cols;
      if (windowSize(&rows, &cols)) {
        json::object b{{"rows", rows}, {"cols", cols}};
        (void)c.request("POST", base + "/resize", json::serialize(b), "application/json");
      }
    }
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = ::read(0, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        // End of our input: the command reads end of file too (a pty's
        // input stays open; its shell exits on its own).
        stdin_on = false;
        if (!pty) (void)c.request("POST", base + "/close-stdin");
        continue;
      }
      (void)c.request("POST", base + "/stdin", std::string(buf.data(), static_cast<size_t>(n)),
                      "application/octet-stream");
    }
  }
}

int exitCodeFor(const Error& e) {
  switch (e.code()) {
    case Code::kNotFound: return kExitNotFound;
    case Code::kPermissionDenied: return kExitCannotRun;
    default: return kExitVesselFailed;
  }
}

}  // namespace

// Long because it is one client session from start to exit code (session,
// exec, stdin pump, event loop, signals), whose parts share its state.
int runExec(const ExecOptions& o) {
  json::object body;
  if (!o.shell.empty()) {
    body["shell"] = o.shell;
  } else {
    json::array argv;
    for (const auto& a : o.argv) argv.emplace_back(a);
    body["cmd"] = std::move(argv);
  }
  json::object env;
  for (const auto& kv : o.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return report(Error(Code::kInvalidArgument, "--env wants KEY=VALUE, not '" + kv + "'"),
                    kExitVesselFailed);
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!env.empty()) body["env"] = std::move(env);
  if (!o.user.empty()) body["user"] = o.user;
  if (!o.cwd.empty()) body["cwd"] = o.cwd;
  if (o.tty) {
    uint16_t rows = 24, cols = 80;
    windowSize(&rows, &cols);
    body["pty"] = json::object{{"rows", rows}, {"cols", cols}};
  }
  if (o.interactive) body["stdin"] = true;

  // An interactive session may outlive the default token lifetime: the
  // token is checked per request, and stdin is one request per chunk.
  auto session = openSession(o.sandbox_id, o.interactive || o.tty ? 24 * 3600 : 0);
  if (!session.ok()) return report(session.error(), kExitVesselFailed);
  // Keepalives arrive every 15 s, so a minute of silence means the server is gone.
  auto stream =
      session->data.stream("POST", "/v1/exec", json::serialize(body), {}, std::chrono::seconds(60));
  if (!stream.ok()) return report(stream.error(), exitCodeFor(stream.error()));
  auto first = stream->next();
  if (!first.ok()) return report(first.error(), kExitVesselFailed);
  if (!first->has_value() || (*first)->type != "start")
    return report(Error(Code::kProtocol, "exec stream did not start"), kExitVesselFailed);
  boost::system::error_code ec;
  json::value start = json::parse((*first)->data, ec);
  uint32_t pid = ec ? 0 : static_cast<uint32_t>(client::num(start, "pid"));

  // SIGWINCH goes to a signalfd read by the input thread, never to a handler.
  sigset_t winch;
  sigemptyset(&winch);
  sigaddset(&winch, SIGWINCH);
  int sigfd = -1;
  if (o.tty && ::pthread_sigmask(SIG_BLOCK, &winch, nullptr) == 0)
    sigfd = ::signalfd(-1, &winch, SFD_CLOEXEC);
  int wake[2] = {-1, -1};
  std::thread input;
  std::optional<RawTerminal> raw;
  if (o.tty && o.interactive) raw.emplace(0);
  if ((o.interactive || sigfd >= 0) && pid && ::pipe2(wake, O_CLOEXEC) == 0)
    input = std::thread(forwardInput, session->data.options(), pid, o.interactive, o.tty, sigfd,
                        wake[0]);

  int code = kExitVesselFailed;
  for (;;) {
    auto ev = stream->next();
    if (!ev.ok()) {
      report(ev.error(), 0);
      break;
    }
    if (!ev->has_value()) {
      report(Error(Code::kUnavailable, "the exec stream ended before the command did"), 0);
      break;
    }
    const auto& e = **ev;
    json::value data = json::parse(e.data, ec);
    if (ec) continue;
    if (e.type == "stdout" || e.type == "stderr") {
      writeAll(e.type == "stdout" ? 1 : 2, unbase64(client::str(data, "data")));
    } else if (e.type == "exit") {
      code = static_cast<int>(client::num(data, "exit_code"));
      break;
    } else if (e.type == "error") {
      report(Error(Code::kUnavailable, client::str(data, "message")), 0);
      break;
    }
  }
  if (input.joinable()) {
    (void)!::write(wake[1], "x", 1);
    input.join();
  }
  for (int fd : {wake[0], wake[1], sigfd})
    if (fd >= 0) ::close(fd);
  return code;
}

void addExec(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<ExecOptions>();
  auto* cmd = app.add_subcommand("exec", "run a command in a sandbox (exits with its exit code)");
  cmd->add_flag("-i,--interactive", o->interactive, "pass stdin to the command");
  cmd->add_flag("-t,--tty", o->tty, "run it on a terminal (raw mode, resized with ours)");
  cmd->add_option("--user", o->user, "user to run as (default: the template's unprivileged user)");
  cmd->add_option("-e,--env", o->env, "KEY=VALUE for the command's environment (repeatable)");
  cmd->add_option("-w,--cwd", o->cwd, "working directory (default: the user's home)");
  cmd->add_option("id", o->sandbox_id, "sandbox id")->required();
  cmd->add_option("command", o->argv, "the command and its arguments, after --")->required();
  cmd->callback([o, run] { *run = [o] { return runExec(*o); }; });
}

}  // namespace vessel::cli
