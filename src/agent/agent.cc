#include "agent/agent.h"

#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

namespace vessel::agent {

using agentproto::Frame;
using agentproto::MsgType;

Agent::Agent(int channel_fd, int sigchld_fd, AgentOptions opts)
    : opts_(std::move(opts)),
      ch_(channel_fd),
      id_(opts_.passwd),
      procs_(ch_, id_),
      files_(ch_),
      ports_(ch_),
      volumes_(ch_),
      sigfd_(sigchld_fd) {}

Agent::~Agent() {
  volumes_.abortAll();
  ports_.abortAll();
  files_.abortAll();
  procs_.killAll();
  ::close(ch_.fd());
}

void Agent::sendHello() {
  agentproto::Hello h;
  h.agent_version = "vessel-agent/" VESSEL_AGENT_VERSION;
  ch_.send(MsgType::kHello, 0, agentproto::encodeHello(h));
  used_ = false;
}

void Agent::run() {
  sendHello();
  while (!stop_) {
    procs_.pump();
    files_.pump();
    if (connected_ && !ch_.flush()) disconnect("channel write failed");
    if (stop_) break;
    PollSet ps;
    if (connected_) {
      ps.add(ch_.fd(), POLLIN | (ch_.wantWrite() ? POLLOUT : 0),
             [this](short rev) { onChannel(rev); });
    } else {
      // A disconnected virtio-serial port reads as EOF without end: probe it
      // on a timer instead of spinning on it.
      ps.wakeWithin(100);
    }
    ps.add(sigfd_, POLLIN, [this](short) { reap(); });
    procs_.poll(ps);
    files_.poll(ps);
    ports_.poll(ps);
    volumes_.poll(ps);
    ps.run();
    if (!connected_ && !stop_) {
      auto r = ch_.readSome();
      if (r == Channel::ReadResult::kNothing || r == Channel::ReadResult::kData) {
        connected_ = true;
        sendHello();
        drainFrames();
      }
    }
  }
}

void Agent::onChannel(short revents) {
  if (revents & POLLOUT) {
    if (!ch_.flush()) return disconnect("channel write failed");
  }
  if (!(revents & (POLLIN | POLLHUP | POLLERR))) return;
  // Bounded per round so processes and the reaper get their turn.
  for (int i = 0; i < 16 && connected_; ++i) {
    auto r = ch_.readSome();
    if (r == Channel::ReadResult::kEof) return disconnect("host closed the channel");
    if (r == Channel::ReadResult::kError) return disconnect("channel read failed");
    if (r == Channel::ReadResult::kNothing) break;
    drainFrames();
  }
}

void Agent::drainFrames() {
  for (;;) {
    auto f = ch_.nextFrame();
    if (!f.ok()) {
      std::fprintf(stderr, "vessel-agent: bad frame from host: %s\n", f.error().message().c_str());
      return disconnect("protocol error");
    }
    if (!f->has_value()) return;
    used_ = true;
    onFrame(std::move(**f));
    if (!connected_) return;
  }
}

void Agent::disconnect(const char* why) {
  if (!connected_) return;
  std::fprintf(stderr, "vessel-agent: %s\n", why);
  // Processes keep running, detached, so a later client can reattach.
  procs_.detachAll();
  files_.abortAll();
  ports_.abortAll();
  // The mounts stay, detached, for the next host to take back (a resumed
  // or forked VM's) within the grace; their callers wait meanwhile.
  volumes_.detachAll();
  ch_.reset();
  connected_ = false;
  if (opts_.exit_on_eof) stop_ = true;
}

void Agent::onFrame(Frame f) {
  if (f.stream == 0) {
    // HelloAck needs no action: version 1 is the only version.
    if (f.type == MsgType::kPing) ch_.send(MsgType::kPong, 0, f.payload.substr(0, 64));
    if (f.type == MsgType::kResync) {
      auto m = agentproto::decodeMsg<agentproto::ResyncMsg>(f.payload);
      if (!m.ok()) return;
      // A new host took over the channel (e.g. vesseld restarted) without
      // the agent seeing it go: everything of the old session ends here.
      std::fprintf(stderr, "vessel-agent: host resynchronized the channel\n");
      procs_.detachAll();
      files_.abortAll();
      ports_.abortAll();
      volumes_.detachAll();
      ch_.resetSession();
      sendHello();
      ch_.sendMsg(0, *m);
    }
    return;
  }
  switch (f.type) {
    case MsgType::kCredit:
    case MsgType::kCancel:
    case MsgType::kStdin:
    case MsgType::kStdinClose:
    case MsgType::kFileData:
    case MsgType::kFileEnd:
    case MsgType::kPortData:
    case MsgType::kPortClose:
    case MsgType::kVolumeData:
      // Frames racing a stream's end land on unknown streams: drop them.
      if (!procs_.onStreamFrame(f.stream, f) && !files_.onStreamFrame(f.stream, f) &&
          !ports_.onStreamFrame(f.stream, f))
        volumes_.onStreamFrame(f.stream, f);
      return;
    default: break;
  }
  if (ch_.hasStream(f.stream)) return;  // the host never reuses an open stream id
  ch_.openStream(f.stream);
  onRequest(f);
}

void Agent::onRequest(Frame& f) {
  uint32_t s = f.stream;
  switch (f.type) {
    case MsgType::kPing: ch_.send(MsgType::kPong, s, f.payload.substr(0, 64)); return ch_.sendOk(s);
    case MsgType::kSetHostname:
    case MsgType::kSetClock:
    case MsgType::kAddEntropy:
    case MsgType::kSetEnv:
    case MsgType::kSetNetwork: return id_.handle(ch_, s, f);
    case MsgType::kGrowRootFs: return id_.handle(ch_, s, f);
    case MsgType::kExec: return procs_.exec(s, f);
    case MsgType::kAttach: return procs_.attach(s, f);
    case MsgType::kSignal: return procs_.signal(s, f);
    case MsgType::kResize: return procs_.resize(s, f);
    case MsgType::kListProcs: return procs_.list(s);
    case MsgType::kReadFile:
    case MsgType::kWriteFile:
    case MsgType::kStat:
    case MsgType::kList:
    case MsgType::kMkdir:
    case MsgType::kRemove:
    case MsgType::kRename:
    case MsgType::kWatch:
    case MsgType::kWriteFileInPlace:
    case MsgType::kWatchTree:
    case MsgType::kSetXattrs:
    case MsgType::kGetXattrs: return files_.request(s, f);
    case MsgType::kConnectPort: return ports_.request(s, f);
    case MsgType::kMountVolume: return volumes_.request(s, f);
    case MsgType::kQuiesceVolumes: return volumes_.quiesce(s, f);
    default:
      return ch_.sendError(
          s, Error(Code::kInvalidArgument,
                   "unsupported request type " + std::to_string(static_cast<int>(f.type))));
  }
}

void Agent::reap() {
  signalfd_siginfo si[16];
  while (::read(sigfd_, si, sizeof si) > 0) {
  }
  // Reap every child, ours or orphaned onto PID 1.
  for (;;) {
    int status;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    procs_.onReaped(pid, status);
  }
}

}  // namespace vessel::agent
