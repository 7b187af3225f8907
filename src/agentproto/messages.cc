#include "agentproto/messages.h"

namespace vessel::agentproto {

std::string_view msgTypeName(MsgType t) {
  switch (t) {
    case MsgType::kHello: return "Hello";
    case MsgType::kHelloAck: return "HelloAck";
    case MsgType::kPing: return "Ping";
    case MsgType::kPong: return "Pong";
    case MsgType::kError: return "Error";
    case MsgType::kOk: return "Ok";
    case MsgType::kCredit: return "Credit";
    case MsgType::kCancel: return "Cancel";
    case MsgType::kResync: return "Resync";
    case MsgType::kSetHostname: return "SetHostname";
    case MsgType::kSetClock: return "SetClock";
    case MsgType::kAddEntropy: return "AddEntropy";
    case MsgType::kSetEnv: return "SetEnv";
    case MsgType::kSetNetwork: return "SetNetwork";
    case MsgType::kGrowRootFs: return "GrowRootFs";
    case MsgType::kExec: return "Exec";
    case MsgType::kExecStarted: return "ExecStarted";
    case MsgType::kStdout: return "Stdout";
    case MsgType::kStderr: return "Stderr";
    case MsgType::kStdin: return "Stdin";
    case MsgType::kStdinClose: return "StdinClose";
    case MsgType::kExit: return "Exit";
    case MsgType::kSignal: return "Signal";
    case MsgType::kResize: return "Resize";
    case MsgType::kListProcs: return "ListProcs";
    case MsgType::kProcList: return "ProcList";
    case MsgType::kAttach: return "Attach";
    case MsgType::kReadFile: return "ReadFile";
    case MsgType::kWriteFile: return "WriteFile";
    case MsgType::kFileData: return "FileData";
    case MsgType::kFileEnd: return "FileEnd";
    case MsgType::kStat: return "Stat";
    case MsgType::kStatResult: return "StatResult";
    case MsgType::kList: return "List";
    case MsgType::kListEntries: return "ListEntries";
    case MsgType::kMkdir: return "Mkdir";
    case MsgType::kRemove: return "Remove";
    case MsgType::kRename: return "Rename";
    case MsgType::kWatch: return "Watch";
    case MsgType::kWatchEvent: return "WatchEvent";
    case MsgType::kWriteFileInPlace: return "WriteFileInPlace";
    case MsgType::kWatchTree: return "WatchTree";
    case MsgType::kSetXattrs: return "SetXattrs";
    case MsgType::kGetXattrs: return "GetXattrs";
    case MsgType::kXattrsResult: return "XattrsResult";
    case MsgType::kConnectPort: return "ConnectPort";
    case MsgType::kPortConnected: return "PortConnected";
    case MsgType::kPortData: return "PortData";
    case MsgType::kPortClose: return "PortClose";
    case MsgType::kMountVolume: return "MountVolume";
    case MsgType::kVolumeData: return "VolumeData";
    case MsgType::kQuiesceVolumes: return "QuiesceVolumes";
    case MsgType::kVolumeKept: return "VolumeKept";
  }
  return "unknown";
}

ErrorMsg toErrorMsg(const Error& e) {
  ErrorMsg m;
  m.code = static_cast<uint16_t>(e.code());
  m.sys_errno = e.sysErrno();
  m.message = e.context().substr(0, kMaxMessage);
  return m;
}

Error fromErrorMsg(const ErrorMsg& m) {
  Code c = m.code <= static_cast<uint16_t>(Code::kInternal) ? static_cast<Code>(m.code)
                                                            : Code::kInternal;
  // errno values from the guest are only used for strerror text; clamp them to
  // a sane range so a hostile value cannot confuse callers.
  int e = (m.sys_errno > 0 && m.sys_errno < 4096) ? m.sys_errno : 0;
  return Error(c, "agent: " + m.message, e);
}

namespace {
template <typename M>
Status check(std::string_view p) {
  auto r = decodeMsg<M>(p);
  if (!r.ok()) return std::move(r).error();
  return okStatus();
}

Status mustBeEmpty(MsgType t, std::string_view p) {
  if (!p.empty())
    return Error(Code::kProtocol, "agent " + std::string(msgTypeName(t)) + ": unexpected payload");
  return okStatus();
}
}  // namespace

// Long because it is one switch over every message type, each case a line
// or two: the table of what a well-formed payload of each type is.
Status validatePayload(MsgType type, std::string_view p) {
  switch (type) {
    case MsgType::kHello: {
      auto r = decodeHello(p);
      if (!r.ok()) return std::move(r).error();
      return okStatus();
    }
    case MsgType::kHelloAck: {
      auto r = decodeHelloAck(p);
      if (!r.ok()) return std::move(r).error();
      return okStatus();
    }
    case MsgType::kPing:
    case MsgType::kPong:
      if (p.size() > 64) return Error(Code::kProtocol, "agent ping: payload too large");
      return okStatus();
    case MsgType::kError: return check<ErrorMsg>(p);
    case MsgType::kOk:
    case MsgType::kCancel:
    case MsgType::kStdinClose:
    case MsgType::kListProcs:
    case MsgType::kFileEnd:
    case MsgType::kPortClose:
    case MsgType::kVolumeKept: return mustBeEmpty(type, p);
    case MsgType::kQuiesceVolumes: return check<QuiesceVolumesMsg>(p);
    case MsgType::kCredit: {
      auto r = decodeMsg<CreditMsg>(p);
      if (!r.ok()) return std::move(r).error();
      if (r->bytes == 0) return Error(Code::kProtocol, "agent credit of zero bytes");
      return okStatus();
    }
    case MsgType::kResync: return check<ResyncMsg>(p);
    case MsgType::kSetHostname: return check<SetHostnameMsg>(p);
    case MsgType::kSetClock: return check<SetClockMsg>(p);
    case MsgType::kAddEntropy: return check<AddEntropyMsg>(p);
    case MsgType::kSetEnv: return check<SetEnvMsg>(p);
    case MsgType::kSetNetwork: return check<SetNetworkMsg>(p);
    case MsgType::kGrowRootFs: return check<GrowRootFsMsg>(p);
    case MsgType::kExec: return check<ExecMsg>(p);
    case MsgType::kExecStarted: return check<ExecStartedMsg>(p);
    case MsgType::kStdout:
    case MsgType::kStderr:
    case MsgType::kStdin:
    case MsgType::kFileData:
    case MsgType::kPortData:
      if (p.size() > kDataChunk)
        return Error(Code::kProtocol,
                     "agent " + std::string(msgTypeName(type)) + ": chunk above 64 KiB");
      return okStatus();
    case MsgType::kExit: return check<ExitMsg>(p);
    case MsgType::kSignal: return check<SignalMsg>(p);
    case MsgType::kResize: return check<ResizeMsg>(p);
    case MsgType::kProcList: return check<ProcListMsg>(p);
    case MsgType::kAttach: return check<AttachMsg>(p);
    case MsgType::kReadFile: return check<ReadFileMsg>(p);
    case MsgType::kWriteFile: return check<WriteFileMsg>(p);
    case MsgType::kStat: return check<StatMsg>(p);
    case MsgType::kStatResult: return check<StatResultMsg>(p);
    case MsgType::kList: return check<ListMsg>(p);
    case MsgType::kListEntries: return check<ListEntriesMsg>(p);
    case MsgType::kMkdir: return check<MkdirMsg>(p);
    case MsgType::kRemove: return check<RemoveMsg>(p);
    case MsgType::kRename: return check<RenameMsg>(p);
    case MsgType::kWatch: return check<WatchMsg>(p);
    case MsgType::kWatchEvent: return check<WatchEventMsg>(p);
    case MsgType::kWriteFileInPlace: return check<WriteFileInPlaceMsg>(p);
    case MsgType::kWatchTree: return check<WatchTreeMsg>(p);
    case MsgType::kSetXattrs: return check<SetXattrsMsg>(p);
    case MsgType::kGetXattrs: return check<GetXattrsMsg>(p);
    case MsgType::kXattrsResult: return check<XattrsResultMsg>(p);
    case MsgType::kConnectPort: return check<ConnectPortMsg>(p);
    case MsgType::kPortConnected: return check<PortConnectedMsg>(p);
    case MsgType::kMountVolume: {
      auto r = decodeMsg<MountVolumeMsg>(p);
      if (!r.ok()) return std::move(r).error();
      if (r->path.empty() || r->path[0] != '/')
        return Error(Code::kProtocol, "agent MountVolume: path not absolute");
      return okStatus();
    }
    case MsgType::kVolumeData:
      // One FUSE message: at least its 16-byte header, at most a write's.
      if (p.size() < 16 || p.size() > kMaxVolumeMessage)
        return Error(Code::kProtocol, "agent VolumeData: " + std::to_string(p.size()) +
                                          " bytes is not a FUSE message's size");
      return okStatus();
  }
  return Error(Code::kProtocol,
               "agent frame of unknown type " + std::to_string(static_cast<unsigned>(type)));
}

}  // namespace vessel::agentproto
