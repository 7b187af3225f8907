#pragma once
// Typed payloads of the agent protocol (docs/agent-protocol.md §5, §6) and
// their codec. Each message lists its fields once, in a static visit(); the
// same list drives encoding and decoding (agentproto/fields.h), so the
// two cannot drift apart. Every string and list has a cap that both sides
// check: encoding an over-long field is an Error for the caller, decoding one
// is a protocol Error.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agentproto/fields.h"
#include "agentproto/frame.h"
#include "base/result.h"

namespace vessel::agentproto {

constexpr size_t kMaxPath = 4096;
constexpr size_t kMaxArgs = 4096;
constexpr size_t kMaxArgLen = 128 * 1024;
constexpr size_t kMaxEnvVars = 1024;
constexpr size_t kMaxEnvLen = 32 * 1024;
constexpr size_t kMaxMessage = 4096;
constexpr size_t kMaxEntropy = 4096;
constexpr size_t kMaxListBatch = 4096;
constexpr uint32_t kMaxListDepth = 32;
constexpr uint32_t kNoOwner = 0xffffffff;

struct ErrorMsg {
  static constexpr MsgType kType = MsgType::kError;
  uint16_t code = 0;
  int32_t sys_errno = 0;
  std::string message;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.code) && v.num(s.sys_errno) && v.str(s.message, kMaxMessage);
  }
};
ErrorMsg toErrorMsg(const Error& e);
// The guest's error as a host Error; an unknown code becomes kInternal.
Error fromErrorMsg(const ErrorMsg& m);

struct CreditMsg {
  static constexpr MsgType kType = MsgType::kCredit;
  uint32_t bytes = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.bytes);
  }
};

// Stream 0 only: the host's resync request and the agent's echo of it.
struct ResyncMsg {
  static constexpr MsgType kType = MsgType::kResync;
  uint64_t nonce = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.nonce);
  }
};

struct SetHostnameMsg {
  static constexpr MsgType kType = MsgType::kSetHostname;
  std::string name;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.name, 64);
  }
};

struct SetClockMsg {
  static constexpr MsgType kType = MsgType::kSetClock;
  int64_t unix_ns = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.unix_ns);
  }
};

struct AddEntropyMsg {
  static constexpr MsgType kType = MsgType::kAddEntropy;
  std::string bytes;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.bytes, kMaxEntropy);
  }
};

// The guest's one network interface, set in one call instead of a shell
// running `ip` (hundreds of milliseconds under TCG, paid on every create
// whose network differs from its warm VM's). Up: the link up with
// `address` (CIDR) as its address, a default route via `gateway` and
// `nameserver` as /etc/resolv.conf's only line. Down: the address removed,
// the link down (which drops its routes), /etc/resolv.conf emptied.
struct SetNetworkMsg {
  static constexpr MsgType kType = MsgType::kSetNetwork;
  static constexpr uint8_t kUp = 1;
  uint8_t flags = 0;
  std::string iface;       // e.g. eth0
  std::string address;     // a.b.c.d/prefix (up)
  std::string gateway;     // a.b.c.d (up)
  std::string nameserver;  // a.b.c.d (up)
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.flags) && v.str(s.iface, 15) && v.str(s.address, 18) && v.str(s.gateway, 15) &&
           v.str(s.nameserver, 15);
  }
};

struct SetEnvMsg {
  static constexpr MsgType kType = MsgType::kSetEnv;
  std::vector<std::string> env;  // KEY=VALUE
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.strList(s.env, kMaxEnvVars, kMaxEnvLen);
  }
};

// The host grew the root disk to `device_bytes`: the agent waits (bounded)
// until the guest's block device shows at least that, then grows the
// mounted root filesystem to fill it.
struct GrowRootFsMsg {
  static constexpr MsgType kType = MsgType::kGrowRootFs;
  uint64_t device_bytes = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.device_bytes);
  }
};

struct ExecMsg {
  static constexpr MsgType kType = MsgType::kExec;
  static constexpr uint8_t kPty = 1;
  static constexpr uint8_t kShell = 2;
  uint8_t flags = 0;
  uint16_t rows = 24;
  uint16_t cols = 80;
  uint32_t timeout_ms = 0;
  std::string user;
  std::string cwd;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.flags) && v.num(s.rows) && v.num(s.cols) && v.num(s.timeout_ms) &&
           v.str(s.user, 64) && v.str(s.cwd, kMaxPath) && v.strList(s.argv, kMaxArgs, kMaxArgLen) &&
           v.strList(s.env, kMaxArgs, kMaxArgLen);
  }
};

struct ExecStartedMsg {
  static constexpr MsgType kType = MsgType::kExecStarted;
  uint32_t pid = 0;
  uint64_t lost_bytes = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.pid) && v.num(s.lost_bytes);
  }
};

struct ExitMsg {
  static constexpr MsgType kType = MsgType::kExit;
  uint8_t exited = 0;
  int32_t code = 0;
  int32_t signal = 0;
  uint8_t timed_out = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.exited) && v.num(s.code) && v.num(s.signal) && v.num(s.timed_out);
  }
};

struct SignalMsg {
  static constexpr MsgType kType = MsgType::kSignal;
  uint32_t pid = 0;
  int32_t signal = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.pid) && v.num(s.signal);
  }
};

struct ResizeMsg {
  static constexpr MsgType kType = MsgType::kResize;
  uint32_t pid = 0;
  uint16_t rows = 0;
  uint16_t cols = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.pid) && v.num(s.rows) && v.num(s.cols);
  }
};

struct AttachMsg {
  static constexpr MsgType kType = MsgType::kAttach;
  uint32_t pid = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.pid);
  }
};

struct ProcEntry {
  uint32_t pid = 0;
  uint8_t running = 0;
  uint8_t attached = 0;
  uint8_t pty = 0;
  std::string command;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.pid) && v.num(s.running) && v.num(s.attached) && v.num(s.pty) &&
           v.str(s.command, 256);
  }
};

struct ProcListMsg {
  static constexpr MsgType kType = MsgType::kProcList;
  std::vector<ProcEntry> procs;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.list(s.procs, kMaxListBatch);
  }
};

struct ReadFileMsg {
  static constexpr MsgType kType = MsgType::kReadFile;
  std::string path;
  uint64_t offset = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath) && v.num(s.offset);
  }
};

struct WriteFileMsg {
  static constexpr MsgType kType = MsgType::kWriteFile;
  std::string path;
  uint32_t mode = 0644;
  uint32_t uid = kNoOwner;
  uint32_t gid = kNoOwner;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath) && v.num(s.mode) && v.num(s.uid) && v.num(s.gid);
  }
};

struct StatMsg {
  static constexpr MsgType kType = MsgType::kStat;
  std::string path;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath);
  }
};

enum class FileType : uint8_t { kFile = 1, kDir = 2, kSymlink = 3, kOther = 4 };

struct FileStat {
  uint8_t type = 0;  // FileType
  uint32_t mode = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  std::string link_target;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.type) && v.num(s.mode) && v.num(s.uid) && v.num(s.gid) && v.num(s.size) &&
           v.num(s.mtime_ns) && v.str(s.link_target, kMaxPath);
  }
};

struct StatResultMsg {
  static constexpr MsgType kType = MsgType::kStatResult;
  FileStat stat;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return FileStat::visit(s.stat, v);
  }
};

struct ListMsg {
  static constexpr MsgType kType = MsgType::kList;
  std::string path;
  uint32_t depth = 1;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath) && v.num(s.depth);
  }
};

struct ListEntry {
  std::string path;  // relative to the listed directory
  FileStat stat;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath) && FileStat::visit(s.stat, v);
  }
};

struct ListEntriesMsg {
  static constexpr MsgType kType = MsgType::kListEntries;
  std::vector<ListEntry> entries;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.list(s.entries, kMaxListBatch);
  }
};

struct MkdirMsg {
  static constexpr MsgType kType = MsgType::kMkdir;
  std::string path;
  uint32_t mode = 0755;
  uint8_t parents = 1;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath) && v.num(s.mode) && v.num(s.parents);
  }
};

struct RemoveMsg {
  static constexpr MsgType kType = MsgType::kRemove;
  std::string path;
  uint8_t recursive = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath) && v.num(s.recursive);
  }
};

struct RenameMsg {
  static constexpr MsgType kType = MsgType::kRename;
  std::string from;
  std::string to;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.from, kMaxPath) && v.str(s.to, kMaxPath);
  }
};

// A write into the file itself (opened with O_TRUNC, created if missing),
// not a temporary renamed into place: inotify watchers see a write, as
// with any program writing the file. Not atomic: a failed transfer leaves
// what was written so far. A file it creates gets `mode` and the owner.
struct WriteFileInPlaceMsg {
  static constexpr MsgType kType = MsgType::kWriteFileInPlace;
  std::string path;
  uint32_t mode = 0644;
  uint32_t uid = kNoOwner;
  uint32_t gid = kNoOwner;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath) && v.num(s.mode) && v.num(s.uid) && v.num(s.gid);
  }
};

// Like Watch, over the directory and every directory below it (those made
// later included, up to kMaxWatchDirs); event names are relative paths.
constexpr uint32_t kMaxWatchDirs = 8192;
struct WatchTreeMsg {
  static constexpr MsgType kType = MsgType::kWatchTree;
  std::string path;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath);
  }
};

// Extended attributes under one prefix (e.g. "user.e2b." for E2B's file
// metadata); names travel without the prefix.
constexpr size_t kMaxXattrs = 256;
struct Xattr {
  std::string name;
  std::string value;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.name, 255) && v.str(s.value, 4096);
  }
};

// Replaces every attribute of `path` under `prefix` with `attrs` (none:
// removes them all); symlinks are not followed.
struct SetXattrsMsg {
  static constexpr MsgType kType = MsgType::kSetXattrs;
  std::string path;
  std::string prefix;
  std::vector<Xattr> attrs;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath) && v.str(s.prefix, 64) && v.list(s.attrs, kMaxXattrs);
  }
};

// The attributes of `path` under `prefix`: one XattrsResult, then Ok.
struct GetXattrsMsg {
  static constexpr MsgType kType = MsgType::kGetXattrs;
  std::string path;
  std::string prefix;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath) && v.str(s.prefix, 64);
  }
};

struct XattrsResultMsg {
  static constexpr MsgType kType = MsgType::kXattrsResult;
  std::vector<Xattr> attrs;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.list(s.attrs, kMaxXattrs);
  }
};

struct WatchMsg {
  static constexpr MsgType kType = MsgType::kWatch;
  std::string path;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath);
  }
};

struct WatchEventMsg {
  static constexpr MsgType kType = MsgType::kWatchEvent;
  static constexpr uint32_t kCreate = 1, kModify = 2, kDelete = 4, kMovedFrom = 8, kMovedTo = 16,
                            kAttrib = 32, kOverflow = 64;
  uint32_t kind = 0;
  std::string name;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.kind) && v.str(s.name, kMaxPath);  // a tree watch's relative path
  }
};

// A TCP connection from the agent to `port` on the guest's loopback
// (127.0.0.1, then ::1 if nothing listens there): the host's way into a
// sandbox's ports, whatever the guest's network. Answered by PortConnected,
// then PortData both ways under credit and PortClose (empty) from each side
// as it half-closes; the agent ends the stream with Ok once both sides have
// closed, or Error (a refused connection: code unavailable, errno
// ECONNREFUSED). Cancel closes the connection at once.
struct ConnectPortMsg {
  static constexpr MsgType kType = MsgType::kConnectPort;
  uint16_t port = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.port);
  }
};

struct PortConnectedMsg {
  static constexpr MsgType kType = MsgType::kPortConnected;
  static constexpr uint8_t kIpv4 = 4, kIpv6 = 6;
  uint8_t family = kIpv4;  // which loopback address answered
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.family);
  }
};

// A volume mounted at `path` in the guest (an absolute directory, made
// if missing): the agent opens /dev/fuse, mounts a FUSE filesystem there
// (nosuid, nodev, allow_other, default_permissions, max_read of
// kMaxVolumeIo; read-only when asked) and relays the session: each FUSE
// request the guest's kernel hands it becomes one VolumeData frame to the
// host, each VolumeData frame from the host is written back whole as one
// answer (a frame is a message, never a piece of one). The first frame is
// the kernel's FUSE_INIT; a mount that fails is an Error instead. The
// stream ends with Ok when the session does (unmounted in the guest);
// Cancel unmounts it (lazily: every call on it then fails with ENOTCONN).
//
// The host going away (a pause, a fork's copy waking, vesseld restarting)
// leaves the mount in place but detached: nothing is read from it, and a
// detached mount nobody takes back within kDetachedVolumeGraceMs of the
// guest's time is unmounted as Cancel does. A MountVolume at the same path
// takes it back: with kKeepSession, a mount that was quiet when the host
// went (QuiesceVolumes, nothing outstanding) continues on the new stream,
// answered by VolumeKept instead of a FUSE_INIT, its open files intact;
// otherwise (or without the flag) the old session is aborted and a new
// one mounted, as for a first mount.
struct MountVolumeMsg {
  static constexpr MsgType kType = MsgType::kMountVolume;
  static constexpr uint8_t kReadOnly = 1;
  static constexpr uint8_t kKeepSession = 2;
  std::string path;
  uint8_t flags = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.str(s.path, kMaxPath) && v.num(s.flags);
  }
};

constexpr int64_t kDetachedVolumeGraceMs = 30'000;

// Before the VM's memory is saved (a pause, a fork): the agent stops reading
// new FUSE requests from every mount and answers Ok once each request it
// relayed has had its answer written back, so the saved memory holds no
// request the host's server has seen but the guest has not had answered.
// Requests the guest makes meanwhile wait in its kernel. kRelease undoes it
// (the pause failed, or the fork's parent runs on); a mount taken back with
// kKeepSession starts unquiet.
struct QuiesceVolumesMsg {
  static constexpr MsgType kType = MsgType::kQuiesceVolumes;
  static constexpr uint8_t kRelease = 1;
  uint8_t flags = 0;
  template <typename S, typename V>
  static bool visit(S& s, V& v) {
    return v.num(s.flags);
  }
};

// Encodes a message's payload; kInvalidArgument if a field is over its cap or
// the payload would exceed kMaxPayload.
template <typename M>
Result<std::string> encodeMsg(const M& m) {
  FieldWriter w;
  if (!M::visit(m, w))
    return Error(Code::kInvalidArgument,
                 "encode " + std::string(msgTypeName(M::kType)) + ": field over its limit");
  std::string p = w.take();
  if (p.size() > kMaxPayload)
    return Error(Code::kInvalidArgument,
                 "encode " + std::string(msgTypeName(M::kType)) + ": message too large");
  return p;
}

// Encodes a whole frame (header + payload).
template <typename M>
Result<std::string> encodeMsgFrame(uint32_t stream, const M& m) {
  VESSEL_ASSIGN_OR_RETURN(std::string p, encodeMsg(m));
  return encodeFrame(M::kType, stream, p);
}

// Decodes an untrusted payload; trailing bytes are an error.
template <typename M>
Result<M> decodeMsg(std::string_view payload) {
  FieldReader r(payload);
  M m;
  if (!M::visit(m, r) || !r.done())
    return Error(Code::kProtocol, "agent " + std::string(msgTypeName(M::kType)) + ": malformed");
  return m;
}

// Checks that a payload is a well-formed instance of its frame's type (raw
// data types: at most kDataChunk; empty-payload types: empty). Used by the
// fuzz target and by receivers that only route frames.
Status validatePayload(MsgType type, std::string_view payload);

}  // namespace vessel::agentproto
