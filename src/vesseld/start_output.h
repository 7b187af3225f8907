#pragma once
// The start kind of a sandbox's log (ops/sandbox_log.h, docs/logs.md): a
// template's start command runs on, detached, inside the template's
// snapshot (templates::Manifest::start_pid), and the agent keeps its
// output, up to agent::kDetachedBuffer, until a client attaches. LocalNode
// attaches a follower to it in each VM of such a template (create, resume,
// fork, adopt) and hands what it reads here, which writes entries of kind
// "start": a line each (`stream`, `line`), then the command's exit.
//
// Bounded as the console is: a line is cut at kMaxStartLineBytes and made
// printable UTF-8; a sandbox gives at most kMaxStartLines line entries
// while this vesseld runs, then one saying the rest is left with the agent,
// and output() answers false: the follower then detaches, so the agent
// keeps only the newest output and the command never waits on a reader.
// Used from the io thread.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "agentclient/agent_client.h"
#include "ops/sandbox_log.h"

namespace vessel::vesseld {

constexpr size_t kMaxStartLineBytes = 1024;
constexpr int kMaxStartLines = 256;

class StartOutput {
 public:
  // Writes to the log `log` names while it lives (SandboxLog::handle()).
  explicit StartOutput(std::shared_ptr<ops::SandboxLog*> log) : log_(std::move(log)) {}

  // What the start command (`pid`) of sandbox `id` wrote on stdout or
  // stderr: each whole line is logged; a partial one waits for the rest,
  // across a pause. False once `id`'s bound is reached.
  bool output(const std::string& id, uint32_t pid, bool is_err, std::string_view bytes);
  // Bytes the agent dropped while nobody was attached (more than it keeps).
  void lost(const std::string& id, uint32_t pid, uint64_t bytes);
  // The command ended: its partial lines, then an entry with its exit.
  void exited(const std::string& id, uint32_t pid, const agentclient::ExitInfo& exit);
  // The sandbox is gone: its partial lines and count go too.
  void forget(const std::string& id) { state_.erase(id); }

 private:
  struct State {
    std::string partial[2];  // stdout, stderr: a line not ended yet
    int lines = 0;           // line entries written (the bound's note included)
  };
  void line(const std::string& id, State& s, uint32_t pid, bool is_err, std::string_view text);

  std::shared_ptr<ops::SandboxLog*> log_;
  std::map<std::string, State> state_;
};

}  // namespace vessel::vesseld
