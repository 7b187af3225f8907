// process.Process: Start, Connect, List, SendInput, StreamInput, CloseStdin,
// SendSignal, Update, onto the agent's processes (docs/e2b-envd.md).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>
#include <csignal>
#include <optional>
#include <tuple>

#include "base/env_var.h"
#include "base/log.h"
#include "e2b/envd/connect.h"
#include "e2b/envd/services.h"

namespace vessel::e2b::envd {

namespace {

const Logger& log() {
  static const Logger l("envd");
  return l;
}

Result<uint32_t> uintField(const json::object& o, std::string_view name) {
  auto* v = field(o, name);
  if (!v || v->is_null()) return 0u;
  if (v->is_int64() && v->as_int64() >= 0 && v->as_int64() <= UINT32_MAX)
    return static_cast<uint32_t>(v->as_int64());
  if (v->is_uint64() && v->as_uint64() <= UINT32_MAX) return static_cast<uint32_t>(v->as_uint64());
  return Error(Code::kInvalidArgument, std::string(name) + " is not a uint32");
}

Result<json::object> objectField(const json::object& o, std::string_view json_name,
                                 std::string_view proto_name = {}) {
  auto* v = field(o, json_name, proto_name);
  if (!v || v->is_null()) return json::object();
  if (!v->is_object())
    return Error(Code::kInvalidArgument, std::string(json_name) + " is not an object");
  return v->as_object();
}

// ProcessSelector {pid} | {tag} -> pid.
Result<uint32_t> selectedPid(Services& s, const Target& t, const json::object& req) {
  VESSEL_ASSIGN_OR_RETURN(json::object sel, objectField(req, "process"));
  if (field(sel, "pid")) {
    VESSEL_ASSIGN_OR_RETURN(uint32_t pid, uintField(sel, "pid"));
    return pid;
  }
  if (field(sel, "tag")) {
    VESSEL_ASSIGN_OR_RETURN(std::string tag, stringField(sel, "tag"));
    if (auto pid = s.processes.pidForTag(t.sandbox_id, tag)) return *pid;
    return Error(Code::kNotFound, "process with tag " + tag + " not found");
  }
  return Error(Code::kInvalidArgument, "process selector has neither pid nor tag");
}

// How long a terminal's Start waits for its program's first output.
constexpr std::chrono::seconds kTerminalReady{5};

// The first event of `ch` within `limit`, or nothing (then it stays queued).
asio::awaitable<std::optional<std::tuple<boost::system::error_code, ProcItem>>> firstWithin(
    ProcChannel& ch, std::chrono::milliseconds limit) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer t(co_await asio::this_coro::executor, limit);
  auto r = co_await (ch.async_receive(asio::as_tuple(asio::use_awaitable)) ||
                     t.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (r.index() != 0) co_return std::nullopt;
  co_return std::get<0>(std::move(r));
}

json::object event(const char* kind, json::object body) {
  json::object ev;
  ev[kind] = std::move(body);
  return json::object{{"event", std::move(ev)}};
}

// envd's EndEvent: Go's ProcessState fields.
json::object endEvent(const agentclient::ExitInfo& x) {
  json::object end;
  if (x.exited) {
    end["exitCode"] = x.code;
    end["exited"] = true;
    end["status"] = "exit status " + std::to_string(x.code);
  } else {
    end["exitCode"] = -1;
    end["exited"] = false;
    const char* name = x.signal == SIGKILL   ? "killed"
                       : x.signal == SIGTERM ? "terminated"
                       : x.signal == SIGINT  ? "interrupt"
                                             : nullptr;
    end["status"] = name ? std::string("signal: ") + name : "signal: " + std::to_string(x.signal);
  }
  return event("end", std::move(end));
}

json::object dataEvent(const agentclient::ProcessEvent& ev, bool pty) {
  const char* out = pty                                                   ? "pty"
                    : ev.kind == agentclient::ProcessEvent::Kind::kStdout ? "stdout"
                                                                          : "stderr";
  json::object data{{out, base64Encode(ev.data)}};
  return event("data", std::move(data));
}

// ProcessInput {stdin} | {pty} -> bytes.
Result<std::string> inputBytes(const json::object& input) {
  auto* v = field(input, "stdin");
  if (!v) v = field(input, "pty");
  if (!v || v->is_null()) return std::string();
  if (!v->is_string()) return Error(Code::kInvalidArgument, "input is not base64 bytes");
  return base64Decode(v->as_string());
}

}  // namespace

// Long because it is the dispatch of process.Process's unary methods (List,
// SendInput, SendSignal, Update, CloseStdin), one case per method.
asio::awaitable<Response> Services::processUnary(const Request& req, std::string method) {
  auto t = target(req);
  if (!t.ok()) co_return unaryError(req, t.error());
  // StreamInput's body is envelopes, every other method's one JSON object.
  auto body =
      method == "StreamInput" ? Result<json::object>(json::object()) : parseObject(req.body());
  if (!body.ok()) co_return unaryError(req, body.error());
  const json::object& in = *body;

  if (method == "List") {
    auto listed = co_await t->agent->listProcesses();
    if (!listed.ok()) co_return unaryError(req, listed.error());
    json::array procs;
    for (const auto& p : *listed) {
      if (!p.running) continue;
      json::object info{{"pid", p.pid}};
      if (auto e = processes.find(t->sandbox_id, p.pid); e && !e->config.empty()) {
        info["config"] = e->config;
        if (!e->tag.empty()) info["tag"] = e->tag;
      } else {
        info["config"] =
            json::object{{"cmd", p.command}, {"args", json::array()}, {"envs", json::object()}};
      }
      procs.push_back(std::move(info));
    }
    co_return unaryOk(req, json::object{{"processes", std::move(procs)}});
  }
  if (method == "StreamInput") {
    // A client stream: the whole body holds the envelopes (HTTP/1.1 has the
    // request end before the answer starts, so ordering is kept).
    EnvelopeDecoder dec;
    if (auto st = dec.feed(req.body()); !st.ok()) co_return unaryError(req, st.error());
    std::shared_ptr<ProcEntry> entry;
    for (;;) {
      auto env = dec.next();
      if (!env.ok()) co_return unaryError(req, env.error());
      if (!*env) break;
      if ((*env)->flags & kFlagEndStream) break;
      auto msg = parseObject((*env)->data);
      if (!msg.ok()) co_return unaryError(req, msg.error());
      if (auto* st = field(*msg, "start"); st && st->is_object()) {
        auto pid = selectedPid(*this, *t, st->as_object());
        if (!pid.ok()) co_return unaryError(req, pid.error());
        auto e = co_await attachProcess(*t, *pid);
        if (!e.ok()) co_return unaryError(req, fromGuest(e.error()));
        entry = *e;
      } else if (auto* d = field(*msg, "data"); d && d->is_object()) {
        if (!entry)
          co_return unaryError(req, Error(Code::kFailedPrecondition, "data before start"));
        auto input = objectField(d->as_object(), "input");
        if (!input.ok()) co_return unaryError(req, input.error());
        auto bytes = inputBytes(*input);
        if (!bytes.ok()) co_return unaryError(req, bytes.error());
        if (!entry->handle)
          co_return unaryError(req, Error(Code::kUnavailable, "process stream lost"));
        if (auto st2 = co_await entry->handle->writeStdin(*bytes); !st2.ok())
          co_return unaryError(req, fromGuest(st2.error()));
      }
    }
    if (dec.buffered() != 0)
      co_return unaryError(req, Error(Code::kInvalidArgument, "truncated input envelope"));
    Response res = unaryOk(req, json::object());
    res.set(http::field::content_type, "application/connect+json");
    res.body() = endStreamEnvelope(nullptr);
    res.prepare_payload();
    co_return res;
  }

  auto pid = selectedPid(*this, *t, in);
  if (!pid.ok()) co_return unaryError(req, pid.error());
  if (method == "SendSignal") {
    auto* v = field(in, "signal");
    int sig = 0;
    if (v && v->is_string()) {
      if (v->as_string() == "SIGNAL_SIGKILL")
        sig = SIGKILL;
      else if (v->as_string() == "SIGNAL_SIGTERM")
        sig = SIGTERM;
    } else if (v && v->is_int64()) {
      if (v->as_int64() == SIGKILL || v->as_int64() == SIGTERM)
        sig = static_cast<int>(v->as_int64());
    }
    if (sig == 0) co_return unaryError(req, Error(Code::kInvalidArgument, "invalid signal"));
    auto st = co_await t->agent->signal(*pid, sig);
    if (!st.ok()) {
      Error e = fromGuest(st.error());
      if (e.sysErrno() == ESRCH)
        e = Error(Code::kNotFound, "process with pid " + std::to_string(*pid) + " not found");
      co_return unaryError(req, e);
    }
    co_return unaryOk(req, json::object());
  }
  if (method == "Update") {
    auto pty = objectField(in, "pty");
    if (!pty.ok()) co_return unaryError(req, pty.error());
    auto size = objectField(*pty, "size");
    if (!size.ok()) co_return unaryError(req, size.error());
    auto cols = uintField(*size, "cols");
    auto rows = uintField(*size, "rows");
    if (!cols.ok() || !rows.ok() || *cols == 0 || *rows == 0 || *cols > 10000 || *rows > 10000)
      co_return unaryError(req, Error(Code::kInvalidArgument, "invalid pty size"));
    auto e = co_await attachProcess(*t, *pid);
    if (!e.ok()) co_return unaryError(req, fromGuest(e.error()));
    auto st =
        co_await (*e)->handle->resize(static_cast<uint16_t>(*rows), static_cast<uint16_t>(*cols));
    if (!st.ok()) co_return unaryError(req, fromGuest(st.error()));
    co_return unaryOk(req, json::object());
  }
  // SendInput, CloseStdin: through the process's attached stream.
  auto e = co_await attachProcess(*t, *pid);
  if (!e.ok()) co_return unaryError(req, fromGuest(e.error()));
  if (!(*e)->handle) co_return unaryError(req, Error(Code::kUnavailable, "process stream lost"));
  if (method == "SendInput") {
    auto input = objectField(in, "input");
    if (!input.ok()) co_return unaryError(req, input.error());
    auto bytes = inputBytes(*input);
    if (!bytes.ok()) co_return unaryError(req, bytes.error());
    auto st = co_await (*e)->handle->writeStdin(*bytes);
    if (!st.ok()) co_return unaryError(req, fromGuest(st.error()));
    co_return unaryOk(req, json::object());
  }
  if (method == "CloseStdin") {
    if ((*e)->pty)
      co_return unaryError(req, Error(Code::kFailedPrecondition,
                                      "cannot close stdin of a PTY process; send Ctrl+D (0x04)"));
    auto st = co_await (*e)->handle->closeStdin();
    if (!st.ok()) co_return unaryError(req, fromGuest(st.error()));
    co_return unaryOk(req, json::object());
  }
  co_return unaryError(req, Error(Code::kNotFound, "no such method process.Process/" + method));
}

// Long because it is the dispatch of process.Process's streaming methods
// (Start, Connect, StreamInput), one case per method over one stream set-up.
asio::awaitable<std::optional<Response>> Services::processStream(const Request& req,
                                                                 beast::tcp_stream& stream,
                                                                 std::string method) {
  auto t = target(req);
  if (!t.ok()) co_return streamError(req, t.error());
  auto msg = singleRequestMessage(req.body());
  if (!msg.ok()) co_return streamError(req, msg.error());
  auto body = parseObject(*msg);
  if (!body.ok()) co_return streamError(req, body.error());
  auto deadline = connectTimeout(req);
  if (!deadline.ok()) co_return streamError(req, deadline.error());
  auto keepalive = keepaliveInterval(req);
  auto lg = log().forSandbox(t->sandbox_id);

  std::shared_ptr<ProcEntry> entry;
  std::shared_ptr<ProcChannel> sub;
  std::optional<std::tuple<boost::system::error_code, ProcItem>> early;
  if (method == "Start") {
    auto proc = objectField(*body, "process");
    if (!proc.ok()) co_return streamError(req, proc.error());
    agentclient::ExecSpec spec;
    auto cmd = stringField(*proc, "cmd");
    if (!cmd.ok() || cmd->empty())
      co_return streamError(req, Error(Code::kInvalidArgument, "process.cmd is required"));
    spec.argv.push_back(*cmd);
    if (auto* a = field(*proc, "args"); a && a->is_array()) {
      for (const auto& x : a->as_array()) {
        if (!x.is_string())
          co_return streamError(req, Error(Code::kInvalidArgument, "args must be strings"));
        spec.argv.emplace_back(x.as_string());
      }
    }
    if (auto* en = field(*proc, "envs"); en && en->is_object()) {
      for (const auto& [k, v] : en->as_object()) {
        if (!portableEnvName(k))
          co_return streamError(
              req, Error(Code::kInvalidArgument,
                         "envs: bad variable name '" + std::string(k).substr(0, 64) + "'"));
        if (!v.is_string() || !envValue(v.as_string()))
          co_return streamError(req,
                                Error(Code::kInvalidArgument, "envs must be strings without NUL"));
        spec.env.push_back(std::string(k) + "=" + std::string(v.as_string()));
      }
    }
    auto user = co_await lookupUser(*t->agent, t->user);
    if (!user.ok()) co_return streamError(req, user.error());
    spec.user = user->name;
    auto cwd = stringField(*proc, "cwd");
    if (cwd.ok() && !cwd->empty()) {
      auto p = resolvePath(*cwd, *user);
      if (!p.ok()) co_return streamError(req, p.error());
      spec.cwd = *p;
    }
    auto pty = objectField(*body, "pty");
    if (!pty.ok()) co_return streamError(req, pty.error());
    if (field(*body, "pty") && !field(*body, "pty")->is_null()) {
      spec.pty = true;
      auto size = objectField(*pty, "size");
      if (size.ok()) {
        auto c = uintField(*size, "cols");
        auto r = uintField(*size, "rows");
        if (c.ok() && *c > 0 && *c <= 10000) spec.cols = static_cast<uint16_t>(*c);
        if (r.ok() && *r > 0 && *r <= 10000) spec.rows = static_cast<uint16_t>(*r);
      }
    }
    // Connect-Timeout-Ms bounds the process, as envd's context does.
    if (*deadline) spec.timeout = **deadline;
    std::string tag;
    if (auto tg = stringField(*body, "tag"); tg.ok()) tag = *tg;
    // `stdin` defaults to true for old clients; the JS SDK sends false
    // unless asked.
    bool keep_stdin = true;
    if (auto* sv = field(*body, "stdin"); sv && sv->is_bool()) keep_stdin = sv->as_bool();
    bool is_pty = spec.pty;
    if (auto room = roomForProcess(t->sandbox_id); !room.ok())
      co_return streamError(req, room.error());
    // The command log's "who": envd's caller holds the sandbox's access
    // token (or a replica vouched for one), which names no one else.
    spec.origin = "envd";
    auto started = co_await t->agent->exec(std::move(spec));
    if (!started.ok()) co_return streamError(req, fromGuest(started.error()));
    if (!keep_stdin && !is_pty) {
      if (auto st = co_await (*started)->closeStdin(); !st.ok())
        lg.warn("process {}: close stdin: {}", (*started)->pid(), st.error().message());
    }
    entry = processes.add(t->sandbox_id, tenantOf(t->sandbox_id), t->agent, std::move(*started),
                          *proc, tag, is_pty);
    sub = processes.subscribe(entry);
    // A terminal is handed over (its start event, which gives the client
    // the pid to type into) once its program has drawn something, a
    // shell's prompt, or after kTerminalReady. A login shell reading its
    // startup files takes a second or two on a fresh TCG guest, and what
    // is typed before its line editor runs is echoed by the tty and read
    // late: the SDK's pty.create would return a terminal that answers
    // seconds after input that E2B's answers at once.
    if (is_pty) early = co_await firstWithin(*sub, kTerminalReady);
  } else {
    auto pid = selectedPid(*this, *t, *body);
    if (!pid.ok()) co_return streamError(req, pid.error());
    auto e = co_await attachProcess(*t, *pid);
    if (!e.ok()) co_return streamError(req, fromGuest(e.error()));
    entry = *e;
    sub = processes.subscribe(entry);
  }

  StreamSpec spec;
  spec.first = event("start", json::object{{"pid", entry->pid}});
  spec.keepalive = event("keepalive", json::object());
  spec.keepalive_interval = keepalive;
  // On Start the deadline bounds the process (spec.timeout above).
  if (method == "Connect") spec.deadline = *deadline;
  bool pty = entry->pty;
  uint32_t pid = entry->pid;
  auto r = co_await serveStream(io, req, stream, spec, [&]() -> asio::awaitable<StreamStep> {
    // (g++ 12: named result, see CONTRIBUTING.md "Coroutines under g++ 12" rule 3.)
    std::tuple<boost::system::error_code, ProcItem> got;
    if (early) {
      got = std::move(*early);
      early.reset();
    } else {
      got = co_await sub->async_receive(asio::as_tuple(asio::use_awaitable));
    }
    auto& [ec, item] = got;
    StreamStep step;
    if (ec || item.error) {
      // The sandbox's agent went away under us (it died or paused): cut.
      lg.info("process {}: stream cut: {}", pid,
              item.error ? item.error->message() : std::string("closed"));
      step.kind = StreamStep::Kind::kCut;
    } else if (item.value.kind == agentclient::ProcessEvent::Kind::kExit) {
      step.kind = StreamStep::Kind::kEnd;
      if (item.value.exit.timed_out)
        step.error = Error(Code::kDeadlineExceeded, "process deadline exceeded");
      else
        step.messages.push_back(endEvent(item.value.exit));
    } else {
      step.messages.push_back(dataEvent(item.value, pty));
    }
    co_return step;
  });
  processes.unsubscribe(entry, sub);
  co_return r;
}

}  // namespace vessel::e2b::envd
