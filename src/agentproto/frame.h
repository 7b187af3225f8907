#pragma once
// The agent channel's framing, shared by the host (untrusted input: the guest
// may send anything) and the guest agent. See docs/agent-protocol.md.
//
// Wire format, little-endian, one byte stream carrying every logical stream:
//   u32 payload_length   (<= kMaxPayload, checked before anything is buffered)
//   u16 type             (MsgType)
//   u16 flags            (must be 0 in version 1)
//   u32 stream_id        (0 = the control stream)
//   payload_length bytes
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::agentproto {

constexpr size_t kHeaderSize = 12;
// Large enough for efficient 64 KiB data chunks plus metadata; small enough
// that a hostile guest cannot make the host buffer much per channel.
constexpr size_t kMaxPayload = 256 * 1024;
constexpr uint32_t kHelloMagic = 0x4c535356;  // "VSSL" little-endian
constexpr uint16_t kProtocolVersion = 1;

enum class MsgType : uint16_t {
  // Handshake: the guest sends kHello as soon as its channel is open; this
  // is the "ready" signal the host's boot waits for. The host answers
  // kHelloAck with the version it chose.
  kHello = 1,
  kHelloAck = 2,
  kPing = 3,
  kPong = 4,
  kError = 5,
  // Generic stream control (docs/agent-protocol.md §3, §4).
  kOk = 16,
  kCredit = 17,
  kCancel = 18,
  // A reconnecting host asks for a fresh session (docs/agent-protocol.md §2).
  kResync = 19,
  // Identity and health.
  kSetHostname = 24,
  kSetClock = 25,
  kAddEntropy = 26,
  kSetEnv = 27,
  kSetNetwork = 28,
  // Disk: grow the root filesystem to its (grown) block device.
  kGrowRootFs = 29,
  // Processes.
  kExec = 32,
  kExecStarted = 33,
  kStdout = 34,
  kStderr = 35,
  kStdin = 36,
  kStdinClose = 37,
  kExit = 38,
  kSignal = 39,
  kResize = 40,
  kListProcs = 41,
  kProcList = 42,
  kAttach = 43,
  // Files.
  kReadFile = 48,
  kWriteFile = 49,
  kFileData = 50,
  kFileEnd = 51,
  kStat = 52,
  kStatResult = 53,
  kList = 54,
  kListEntries = 55,
  kMkdir = 56,
  kRemove = 57,
  kRename = 58,
  kWatch = 59,
  kWatchEvent = 60,
  // Protocol 1 extensions (issue 12); an agent without them answers Error.
  kWriteFileInPlace = 61,
  kWatchTree = 62,
  kSetXattrs = 63,
  kGetXattrs = 64,
  kXattrsResult = 65,
  // Sandbox ports (issue 12): a TCP connection to a port inside the guest,
  // relayed under credit; an agent without them answers Error.
  kConnectPort = 66,
  kPortConnected = 67,
  kPortData = 68,
  kPortClose = 69,
  // Volumes (issue 27): a FUSE session at a path in the guest, relayed to
  // the host's file server; an agent without them answers Error.
  kMountVolume = 70,
  kVolumeData = 71,
  // Volumes kept across a pause or a fork (issue 27): the host quiets every
  // mount before the VM's memory is saved, and a resumed VM's mounts carry
  // on with the server that has their state.
  kQuiesceVolumes = 72,
  kVolumeKept = 73,
};

// Flow control: every frame on a non-zero stream except Credit and Cancel
// costs kFrameCost + payload bytes of the sender's credit on that stream. The
// fixed part is above the 12 header bytes so that it also pays for the
// receiver's bookkeeping of a frame: a flood of empty frames stays bounded.
constexpr uint32_t kFrameCost = 64;
constexpr uint32_t kInitialWindow = 1024 * 1024;
// Outstanding credit above this is a protocol violation (no overflow games).
constexpr uint64_t kMaxCredit = 64ull * 1024 * 1024;
// Raw data frames (Stdout, Stderr, Stdin, FileData, PortData) carry at most this much.
constexpr size_t kDataChunk = 64 * 1024;
// A VolumeData frame is one whole FUSE message, never split: a write of
// kMaxVolumeIo bytes plus its headers (80 bytes) in one direction, a read's
// answer (16 bytes of header) in the other. The mount bounds both at
// kMaxVolumeIo (max_read in the guest, max_write in the host's server).
constexpr size_t kMaxVolumeIo = 128 * 1024;
constexpr size_t kMaxVolumeMessage = kMaxVolumeIo + 4096;
static_assert(kMaxVolumeMessage <= kMaxPayload);

inline uint32_t frameCost(size_t payload_len) {
  return static_cast<uint32_t>(kFrameCost + payload_len);
}
inline bool costsCredit(MsgType t) { return t != MsgType::kCredit && t != MsgType::kCancel; }
std::string_view msgTypeName(MsgType t);

struct Frame {
  MsgType type;
  uint16_t flags = 0;
  uint32_t stream = 0;
  std::string payload;
};

std::string encodeFrame(MsgType type, uint32_t stream, std::string_view payload);

// Incremental decoder: feed() whatever bytes arrived, then call next() until
// it yields nothing. A frame whose header announces more than kMaxPayload or
// non-zero flags is an Error, and the decoder stays failed: the channel is
// not trusted after that.
class FrameDecoder {
 public:
  Status feed(std::string_view bytes);
  Result<std::optional<Frame>> next();
  size_t buffered() const { return buf_.size() - pos_; }
  // Hands over bytes received but not yet decoded (to the next owner of
  // the channel after the handshake).
  std::string takeBuffered();

 private:
  std::string buf_;
  size_t pos_ = 0;
  std::optional<Error> failed_;
};

struct Hello {
  uint16_t min_version = kProtocolVersion;
  uint16_t max_version = kProtocolVersion;
  std::string agent_version;  // free text, at most 64 bytes
};
std::string encodeHello(const Hello& h);
Result<Hello> decodeHello(std::string_view payload);

struct HelloAck {
  uint16_t version = kProtocolVersion;
};
std::string encodeHelloAck(const HelloAck& a);
Result<HelloAck> decodeHelloAck(std::string_view payload);

}  // namespace vessel::agentproto
