#pragma once
// AgentClient: the host's side of the agent protocol (docs/agent-protocol.md)
// for one sandbox. It multiplexes calls onto the channel as streams and
// checks every frame the guest sends: a malformed, oversized, unexpected or
// uncredited frame, or the channel closing, fails every call on this client
// with an Error; nothing the guest sends can crash the host or make it buffer
// more than the per-stream window.
//
// Threading: the client and every object it hands out live on the executor
// of the channel socket (one io_context thread); call them only from there.
// Ownership: the client takes the connected channel socket by move (from
// Machine::vm->agentChannel(), leaving the Vm's socket closed) plus the bytes
// read after the handshake (Machine::leftover). It stays alive while its
// reader runs or while any handle (Process, FileReader, ...) refers to it.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agentproto/frame.h"
#include "agentproto/messages.h"
#include "base/result.h"

namespace vessel::agentclient {

namespace asio = boost::asio;

struct ExecSpec {
  // Either argv, or a shell command run by /bin/sh -c.
  std::vector<std::string> argv;
  std::string shell;
  std::vector<std::string> env;  // KEY=VALUE, on top of the defaults
  std::string cwd;               // "" = the user's home
  std::string user;              // "" = the unprivileged `user`; "root" on request
  bool pty = false;
  uint16_t rows = 24;
  uint16_t cols = 80;
  std::chrono::milliseconds timeout{0};  // 0 = none; on expiry the group is killed
  // Who asked, for the command log (CommandObserver): a front end's
  // caller: a data-plane session ("ses-…"), or "envd"; never a token. "" for the host's own
  // commands (set-up, a front end's helpers), which are not logged.
  std::string origin;
};

struct ExitInfo {
  bool exited = false;  // true: code is valid; false: killed by signal
  int code = 0;
  int signal = 0;
  bool timed_out = false;
};

// A command a front end ran (ExecSpec::origin set), as the command log
// keeps it: what ran, as whom, where, and when; never its environment's
// values (they may hold secrets) nor its input or output, only their sizes.
struct CommandNote {
  std::string origin;
  std::vector<std::string> argv;       // or, for a shell command, {"/bin/sh", "-c", shell}
  std::vector<std::string> env_names;  // the names it set, without their values
  std::string user, cwd;
  bool pty = false;
  uint32_t pid = 0;
  int64_t started_ms = 0;  // wall clock, ms since the epoch
  std::chrono::steady_clock::time_point started;
  uint64_t bytes_in = 0, bytes_out = 0;  // stdin written; stdout and stderr read
};

// A file a front end read or changed (AgentClient::noteFile): what, where
// and how big; never its data.
struct FileNote {
  std::string origin;  // as ExecSpec::origin; "" is not logged
  std::string op;      // read, write, remove, mkdir, rename
  std::string path;
  std::string to;                // rename's destination
  std::optional<uint64_t> size;  // bytes read or written
};

// A connection to a port of the guest a front end relayed
// (PortStream::logAs), told once it is closed.
struct PortNote {
  std::string origin;  // the front end ("ingress")
  std::string peer;    // the client's address, as the front end counts it
  uint16_t port = 0;
  uint64_t bytes_in = 0, bytes_out = 0;  // to the guest's server, from it
  int64_t started_ms = 0;                // wall clock, ms since the epoch
  std::chrono::steady_clock::time_point started;
};

// Hears of each logged command on the client's executor: started() once
// the agent has started it, ended() once a handle (its exec's, or an
// attach's) reads its exit. A command whose exit nobody reads (detached,
// or its sandbox ended first) has no ended(). file() and port(): the
// front ends' file operations and port connections, the same way.
class CommandObserver {
 public:
  virtual ~CommandObserver() = default;
  virtual void started(const CommandNote& c) = 0;
  virtual void ended(const CommandNote& c, const ExitInfo& exit) = 0;
  virtual void file(const FileNote&) {}
  virtual void port(const PortNote&) {}
};

struct ProcessEvent {
  enum class Kind { kStdout, kStderr, kExit };
  Kind kind;
  std::string data;  // output (kStdout, kStderr)
  ExitInfo exit;     // kExit: the last event of a process
};

struct ProcessInfo {
  uint32_t pid = 0;
  bool running = false;
  bool attached = false;
  bool pty = false;
  std::string command;
};

struct WriteFileOptions {
  std::string path;
  uint32_t mode = 0644;
  std::optional<uint32_t> uid;  // unset: the agent's default (root)
  std::optional<uint32_t> gid;
  // Write the file itself rather than a temporary renamed over it: watchers
  // see a write; not atomic (agentproto::WriteFileInPlaceMsg).
  bool in_place = false;
};

// A whole command's result, for callers that do not stream.
struct ExecResult {
  ExitInfo exit;
  std::string out;
  std::string err;
};

class AgentClient;

namespace internal {
struct Stream;
}

// A running process's stream. Destroying it (or detach()) leaves the process
// running and detached; AgentClient::attach(pid) resumes it.
class Process {
 public:
  Process(std::shared_ptr<AgentClient> c, std::shared_ptr<internal::Stream> s, uint32_t pid,
          uint64_t lost);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  uint32_t pid() const { return pid_; }
  // Output dropped while no client was attached (reported by attach()).
  uint64_t lostBytes() const { return lost_; }
  // The next output chunk, in the order the guest read it, or the exit as
  // the last event.
  asio::awaitable<Result<ProcessEvent>> next();
  asio::awaitable<Status> writeStdin(std::string_view data);
  asio::awaitable<Status> closeStdin();
  asio::awaitable<Status> signal(int sig);
  asio::awaitable<Status> resize(uint16_t rows, uint16_t cols);
  void detach();

 private:
  std::shared_ptr<AgentClient> c_;
  std::shared_ptr<internal::Stream> s_;
  uint32_t pid_;
  uint64_t lost_;
  bool done_ = false;
};

// A streamed download; read() yields chunks until nullopt (end of file).
class FileReader {
 public:
  FileReader(std::shared_ptr<AgentClient> c, std::shared_ptr<internal::Stream> s);
  ~FileReader();
  asio::awaitable<Result<std::optional<std::string>>> read();

 private:
  std::shared_ptr<AgentClient> c_;
  std::shared_ptr<internal::Stream> s_;
  bool done_ = false;
};

// A streamed, atomic upload: nothing is visible at the path until finish()
// succeeds; destroying it unfinished discards the temporary file.
class FileWriter {
 public:
  FileWriter(std::shared_ptr<AgentClient> c, std::shared_ptr<internal::Stream> s);
  ~FileWriter();
  asio::awaitable<Status> write(std::string_view data);
  asio::awaitable<Status> finish();

 private:
  std::shared_ptr<AgentClient> c_;
  std::shared_ptr<internal::Stream> s_;
  bool done_ = false;
};

struct WatchEvent {
  uint32_t kind = 0;  // agentproto::WatchEventMsg::k* bits
  std::string name;
};

class Watch {
 public:
  Watch(std::shared_ptr<AgentClient> c, std::shared_ptr<internal::Stream> s);
  ~Watch();
  asio::awaitable<Result<WatchEvent>> next();

 private:
  std::shared_ptr<AgentClient> c_;
  std::shared_ptr<internal::Stream> s_;
  bool done_ = false;
};

// A TCP connection to a port inside the guest, relayed by its agent
// (AgentClient::connectPort). read() and write() may wait at the same time
// (one reader, one writer). Destroying it closes the connection.
class PortStream {
 public:
  PortStream(std::shared_ptr<AgentClient> c, std::shared_ptr<internal::Stream> s);
  ~PortStream();
  PortStream(const PortStream&) = delete;
  PortStream& operator=(const PortStream&) = delete;

  // The next bytes the guest's server sent, or nullopt once it closed its
  // side (then always nullopt). A reset connection is an Error.
  asio::awaitable<Result<std::optional<std::string>>> read();
  // Sends `data`, waiting for credit when the guest reads slowly.
  asio::awaitable<Status> write(std::string_view data);
  // Half-closes: the server reads end of file; its answer can still come.
  asio::awaitable<Status> closeWrite();
  // Closes both ways now.
  void close();
  // Logs the connection (CommandObserver::port) once this handle goes:
  // `origin` is the front end relaying it, `peer` its client.
  void logAs(std::string origin, std::string peer, uint16_t port);

 private:
  std::shared_ptr<AgentClient> c_;
  std::shared_ptr<internal::Stream> s_;
  std::optional<PortNote> note_;
  bool eof_ = false;    // read side ended
  bool ended_ = false;  // terminal frame seen, or closed
  bool wclosed_ = false;
};

// A volume's FUSE session in the guest, relayed by its agent
// (AgentClient::mountVolume): read() gives the guest kernel's requests,
// one whole FUSE message each, write() sends the file server's answers.
// The bytes are the guest's and untrusted: only the confined file server
// parses them. Destroying it unmounts the volume in the guest.
class VolumeStream {
 public:
  // `first`: the kernel's FUSE_INIT of a new session, nullopt for a
  // session kept from before (MountVolume with kKeepSession, VolumeKept).
  VolumeStream(std::shared_ptr<AgentClient> c, std::shared_ptr<internal::Stream> s,
               std::optional<std::string> first);
  ~VolumeStream();
  VolumeStream(const VolumeStream&) = delete;
  VolumeStream& operator=(const VolumeStream&) = delete;

  // The next request, or nullopt once the session ended in the guest
  // (unmounted there); a failed mount or channel is an Error.
  asio::awaitable<Result<std::optional<std::string>>> read();
  // One answer (at most agentproto::kMaxVolumeMessage bytes), waiting for
  // credit when the guest is slow to take them.
  asio::awaitable<Status> write(std::string_view message);
  // Unmounts now (the guest's calls on it fail with ENOTCONN).
  void close();
  // Whether this is a session kept from before a pause (no FUSE_INIT: the
  // server that answered it before must answer it now).
  bool kept() const { return kept_; }
  // Relays the session to `sock`, a SOCK_SEQPACKET socket whose peer is
  // the volume's file server (one FUSE message per packet), until either
  // side ends: Ok when the guest unmounted or the server exited, an Error
  // when the channel failed or the guest sent a request whose FUSE header
  // does not give its own length. `sock` stays the caller's.
  asio::awaitable<Status> relay(int sock);

 private:
  struct Waiter;
  asio::awaitable<Status> guestToServer(int sock, Waiter& w);
  asio::awaitable<Status> serverToGuest(int sock, Waiter& w);

  std::shared_ptr<AgentClient> c_;
  std::shared_ptr<internal::Stream> s_;
  std::optional<std::string> first_;  // FUSE_INIT, read by mountVolume
  bool kept_ = false;                 // a kept session: there was no FUSE_INIT
  bool ended_ = false;                // read() gives nothing more
  bool closed_ = false;               // close() called
};

// Bounds on what a guest's replies may make the host hold and decode: the
// bytes of one reply (all its frames), and the entries of a directory or
// process listing (each entry costs far more decoded, and in the API's JSON,
// than on the wire).
constexpr size_t kMaxReplyBytes = 16u << 20;
constexpr size_t kMaxListEntries = 100'000;
// Logged commands a client follows at once; past it, new ones are logged
// as started only.
constexpr size_t kMaxNotedCommands = 4096;

class AgentClient : public std::enable_shared_from_this<AgentClient> {
 public:
  using Socket = asio::local::stream_protocol::socket;

  // `name` prefixes errors (the sandbox id). Starts reading immediately.
  static std::shared_ptr<AgentClient> create(Socket channel, std::string leftover,
                                             std::string name);
  // Takes over the channel of a guest that is already running (e.g. after
  // vesseld restarted): asks the agent for a fresh session with Resync and
  // skips whatever the old session left in the channel until the agent's
  // echo. Processes keep running, detached; attach() resumes them.
  // `in_step`: the caller knows the agent's decoder sits on a frame
  // boundary (a template snapshot is taken with the channel idle), so the
  // first attempt skips the 256 KiB of zeros that realign it otherwise;
  // retries still send them.
  static asio::awaitable<Result<std::shared_ptr<AgentClient>>> reconnect(
      Socket channel, std::string name, std::chrono::steady_clock::time_point deadline,
      bool in_step = false);
  ~AgentClient();

  // The name errors are prefixed with: a pooled VM's client is renamed to
  // the sandbox that claims it.
  void setName(std::string name) { name_ = std::move(name); }
  // The command log (CommandObserver): execs with an origin are told to
  // `o`. Set by whoever hands the client to the front ends.
  void setCommandObserver(std::shared_ptr<CommandObserver> o) { observer_ = std::move(o); }
  const std::shared_ptr<CommandObserver>& commandObserver() const { return observer_; }
  // A front end's file operation, for the log (FileNote; nothing without
  // an origin or an observer). The front end tells it once it succeeded.
  void noteFile(const FileNote& n) const {
    if (observer_ && !n.origin.empty()) observer_->file(n);
  }
  void notePort(const PortNote& n) const {
    if (observer_ && !n.origin.empty()) observer_->port(n);
  }
  // Fails every outstanding and later call with kUnavailable and closes the
  // channel; the guest sees the host disconnect.
  void close();
  // Set once the channel has failed, with the reason.
  const std::optional<Error>& failure() const { return failure_; }
  // The reply deadline: every later request whose answer is immediate (all
  // but a file write, whose answer follows its data) fails with
  // kDeadlineExceeded if the guest has not begun to answer it within
  // `limit`, and its stream is cancelled; the channel stays up, so a guest
  // that was only slow (or whose agent was stopped and resumed) serves the
  // next call. A running process's output and exit are not bounded by it.
  // 0 (the default): no deadline.
  void setReplyTimeout(std::chrono::milliseconds limit) { reply_timeout_ = limit; }
  // Completes once the channel has failed or was closed (at once if it
  // has), or when the wait is cancelled: for supervisors.
  asio::awaitable<void> waitClosed();
  // Bytes the guest's frames occupy in stream inboxes, waiting for callers:
  // bounded by the window per stream (tests and metrics).
  size_t bufferedBytes() const;

  // Identity and health.
  asio::awaitable<Status> ping();
  asio::awaitable<Status> setHostname(std::string name);
  asio::awaitable<Status> setClock(std::chrono::system_clock::time_point t);
  asio::awaitable<Status> addEntropy(std::string bytes);
  asio::awaitable<Status> setDefaultEnv(std::vector<std::string> env);
  // The guest's interface, address, default route and resolver in one call
  // (agentproto::SetNetworkMsg). An agent older than the message answers
  // kInvalidArgument "unsupported request type".
  asio::awaitable<Status> setNetwork(agentproto::SetNetworkMsg m);
  // After the host grew the root disk to `device_bytes`: the guest's root
  // filesystem grows to fill it (GrowRootFs).
  asio::awaitable<Status> growRootFs(uint64_t device_bytes);

  // Processes.
  asio::awaitable<Result<std::unique_ptr<Process>>> exec(ExecSpec spec);
  asio::awaitable<Result<std::unique_ptr<Process>>> attach(uint32_t pid);
  asio::awaitable<Status> signal(uint32_t pid, int sig);
  asio::awaitable<Status> resize(uint32_t pid, uint16_t rows, uint16_t cols);
  asio::awaitable<Result<std::vector<ProcessInfo>>> listProcesses();
  // Runs to completion collecting output; more than max_output bytes on
  // either stream is an Error (the process is detached, not waited for).
  asio::awaitable<Result<ExecResult>> run(ExecSpec spec, size_t max_output = 16 << 20);

  // Files.
  asio::awaitable<Result<std::unique_ptr<FileReader>>> readFile(std::string path,
                                                                uint64_t offset = 0);
  asio::awaitable<Result<std::unique_ptr<FileWriter>>> writeFile(WriteFileOptions opts);
  asio::awaitable<Result<agentproto::FileStat>> stat(std::string path);
  // At most kMaxListEntries entries (kResourceExhausted beyond: list a
  // subdirectory or a smaller depth).
  asio::awaitable<Result<std::vector<agentproto::ListEntry>>> list(std::string path,
                                                                   uint32_t depth = 1);
  asio::awaitable<Status> mkdir(std::string path, uint32_t mode = 0755, bool parents = true);
  asio::awaitable<Status> remove(std::string path, bool recursive = false);
  asio::awaitable<Status> rename(std::string from, std::string to);
  // Extended attributes under `prefix` (names without it): set replaces
  // them all (agentproto::SetXattrsMsg).
  asio::awaitable<Status> setXattrs(std::string path, std::string prefix,
                                    std::vector<agentproto::Xattr> attrs);
  asio::awaitable<Result<std::vector<agentproto::Xattr>>> getXattrs(std::string path,
                                                                    std::string prefix);
  // `recursive`: the whole tree below path (agentproto::WatchTreeMsg); event
  // names are then paths relative to it.
  asio::awaitable<Result<std::unique_ptr<Watch>>> watch(std::string path, bool recursive = false);

  // Sandbox ports: a TCP connection to `port` on the guest's loopback,
  // whatever its network (agentproto::ConnectPortMsg). Nothing listening
  // is kUnavailable (errno ECONNREFUSED); an agent older than the message
  // is kFailedPrecondition saying so.
  asio::awaitable<Result<std::unique_ptr<PortStream>>> connectPort(uint16_t port);

  // Volumes: a FUSE mount at `path` in the guest whose session is relayed
  // here (agentproto::MountVolumeMsg); answered once the guest's kernel
  // sent its first request (FUSE_INIT), so a mount that failed is an
  // Error here. An agent older than the message is kFailedPrecondition.
  // `keep_session`: a detached mount at `path` that was quiet is taken back
  // with its session (VolumeStream::kept()); else a new session replaces it.
  asio::awaitable<Result<std::unique_ptr<VolumeStream>>> mountVolume(std::string path,
                                                                     bool read_only,
                                                                     bool keep_session = false);
  // Before the VM's memory is saved: every mount stops taking requests and
  // this answers once none is outstanding (agentproto::QuiesceVolumesMsg);
  // `release` undoes it.
  asio::awaitable<Status> quiesceVolumes(bool release);

  // Stream plumbing for the handle classes above.
  asio::awaitable<Result<agentproto::Frame>> recv(internal::Stream& s);
  asio::awaitable<Status> sendData(internal::Stream& s, agentproto::MsgType type,
                                   std::string_view payload);
  void cancel(internal::Stream& s);
  Error streamError(const char* what) const;
  // The command log's counts and end, from the Process handles.
  void noteBytes(uint32_t pid, size_t n, bool in);
  void noteExit(uint32_t pid, const ExitInfo& e);

 private:
  AgentClient(Socket channel, std::string leftover, std::string name);
  void start();
  asio::awaitable<void> readLoop(std::shared_ptr<AgentClient> self);
  asio::awaitable<void> writeLoop(std::shared_ptr<AgentClient> self);
  void drainDecoder();
  Status onFrame(agentproto::Frame f);
  void fail(Error e);
  void enqueue(std::string bytes);
  void grant(internal::Stream& s, uint32_t cost, bool force);
  // Waits for news on `s` (a frame, its end, the channel's failure), or
  // fails at its reply deadline.
  asio::awaitable<Status> awaitFrame(internal::Stream& s);

  template <typename M>
  Result<std::shared_ptr<internal::Stream>> open(int kind, const M& m);
  // Opens a stream and waits for its terminal frame, collecting the frames
  // before it.
  template <typename M>
  asio::awaitable<Result<std::vector<agentproto::Frame>>> call(int kind, M m);
  // The same, handing each frame to `each` (Status(Frame&)) as it arrives:
  // a reply of many frames is decoded a frame (at most kMaxPayload) per turn
  // of the io loop, never in one go. An Error from `each` ends the call.
  template <typename M, typename F>
  asio::awaitable<Status> callEach(int kind, M m, F each);
  template <typename M>
  asio::awaitable<Status> callStatus(int kind, M m);
  asio::awaitable<Result<std::unique_ptr<Process>>> startProcess(
      Result<std::shared_ptr<internal::Stream>> s);
  void noteStart(const ExecSpec& spec, const agentproto::ExecMsg& m, uint32_t pid);

  Socket sock_;
  std::string name_;
  std::string leftover_;
  agentproto::FrameDecoder decoder_;
  std::map<uint32_t, std::shared_ptr<internal::Stream>> streams_;
  uint32_t next_stream_ = 1;
  std::deque<std::string> outq_;
  bool writing_ = false;
  std::optional<Error> failure_;
  std::set<asio::steady_timer*> closed_waiters_;
  std::chrono::milliseconds reply_timeout_{0};
  std::shared_ptr<CommandObserver> observer_;
  // Logged commands not yet ended, by pid; at most kMaxNotedCommands (a
  // guest's pids are reused only after exit, which removes the entry).
  std::map<uint32_t, CommandNote> commands_;
};

}  // namespace vessel::agentclient
