#pragma once
// Processes started for the host: spawn (pipes or pty), stdin, output
// streaming under the stream's credit, exit reporting, signals, resize,
// timeouts, and detach/reattach with a bounded buffer (docs/agent-protocol.md
// "Processes").
#include <sys/types.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "agent/channel.h"
#include "agent/identity.h"
#include "agent/poll_set.h"
#include "agentproto/messages.h"

namespace vessel::agent {

// A detached process's output is kept up to this; older output is dropped
// and counted.
constexpr size_t kDetachedBuffer = 1024 * 1024;
// While attached, the agent stops reading a pipe above this: the pipe itself
// then slows the process down.
constexpr size_t kAttachedBuffer = 128 * 1024;
constexpr size_t kMaxProcesses = 1024;
constexpr size_t kMaxFinishedKept = 256;

struct Proc {
  pid_t pid = -1;
  std::string command;
  bool pty = false;
  int out = -1;  // stdout pipe, or the pty master
  int err = -1;
  int in = -1;  // stdin pipe, or a dup of the pty master
  std::string stdin_pending;
  uint32_t stdin_credit_owed = 0;
  bool stdin_close_requested = false;
  struct Chunk {
    bool is_err;
    std::string data;
  };
  std::deque<Chunk> buf;
  size_t buf_bytes = 0;
  uint64_t lost = 0;
  uint32_t stream = 0;  // attached stream; 0 = detached
  bool reaped = false;
  int wait_status = 0;
  bool timed_out = false;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  uint64_t finished_seq = 0;  // order of finishing, for evicting old records
};

class Processes {
 public:
  Processes(Channel& ch, const Identity& id) : ch_(ch), id_(id) {}
  ~Processes();

  // Requests that open a stream.
  void exec(uint32_t stream, const agentproto::Frame& f);
  void attach(uint32_t stream, const agentproto::Frame& f);
  void signal(uint32_t stream, const agentproto::Frame& f);
  void resize(uint32_t stream, const agentproto::Frame& f);
  void list(uint32_t stream);
  // Stdin, StdinClose, Credit and Cancel on a process stream; false if the
  // stream is not one of ours.
  bool onStreamFrame(uint32_t stream, const agentproto::Frame& f);

  // From the SIGCHLD reaper; pids we did not start are orphans and ignored.
  void onReaped(pid_t pid, int status);
  void detachAll();
  void killAll();

  void poll(PollSet& ps);
  // Moves output and exits to the channel as credit allows, fires timeouts.
  void pump();

 private:
  Proc* byStream(uint32_t stream);
  void readFrom(Proc& p, bool from_err, bool drain);
  void closeFd(int& fd);
  void writeStdin(Proc& p);
  void append(Proc& p, bool is_err, std::string data);
  void detach(Proc& p);
  bool finished(const Proc& p) const { return p.reaped && p.out < 0 && p.err < 0 && p.buf.empty(); }
  void evictFinished();

  Channel& ch_;
  const Identity& id_;
  std::map<pid_t, std::unique_ptr<Proc>> procs_;
  uint64_t finish_counter_ = 0;
};

}  // namespace vessel::agent
