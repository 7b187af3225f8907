#pragma once
// The agent's event loop: one thread, poll(2) over the channel, a SIGCHLD
// signalfd and the processes', watches', relayed ports' and volumes' fds. Frames are
// dispatched by type to the identity, process, file and port services.
#include <string>

#include "agent/channel.h"
#include "agent/files.h"
#include "agent/identity.h"
#include "agent/ports.h"
#include "agent/process.h"
#include "agent/volumes.h"

namespace vessel::agent {

struct AgentOptions {
  std::string passwd = "/etc/passwd";
  // Host-run (tests): the channel's EOF ends the agent and its processes.
  // As PID 1: EOF means the host disconnected; keep everything running.
  bool exit_on_eof = false;
};

class Agent {
 public:
  // channel_fd: a connected byte stream, owned by the agent from now on.
  Agent(int channel_fd, int sigchld_fd, AgentOptions opts);
  ~Agent();
  // Returns only when exit_on_eof is set and the channel ended.
  void run();

 private:
  void sendHello();
  void onChannel(short revents);
  void drainFrames();
  void onFrame(agentproto::Frame f);
  void onRequest(agentproto::Frame& f);
  void disconnect(const char* why);
  void reap();

  AgentOptions opts_;
  Channel ch_;
  Identity id_;
  Processes procs_;
  Files files_;
  Ports ports_;
  Volumes volumes_;
  int sigfd_;
  bool connected_ = true;
  bool used_ = false;  // a frame arrived since the last Hello
  bool stop_ = false;
};

}  // namespace vessel::agent
