// Fuzzes the agent channel's decoders: the frame decoder fed in irregular
// pieces, and every message type's payload decoder. Every input must end in
// frames or an Error, never in a crash, a hang or unbounded buffering.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agentproto/frame.h"
#include "agentproto/messages.h"

namespace {

using namespace vessel::agentproto;

void decodeAll(std::string_view p) {
  (void)decodeHello(p);
  (void)decodeHelloAck(p);
  (void)decodeMsg<ErrorMsg>(p);
  (void)decodeMsg<CreditMsg>(p);
  (void)decodeMsg<ResyncMsg>(p);
  (void)decodeMsg<SetHostnameMsg>(p);
  (void)decodeMsg<GrowRootFsMsg>(p);
  (void)decodeMsg<SetClockMsg>(p);
  (void)decodeMsg<AddEntropyMsg>(p);
  (void)decodeMsg<SetEnvMsg>(p);
  (void)decodeMsg<SetNetworkMsg>(p);
  (void)decodeMsg<ExecMsg>(p);
  (void)decodeMsg<ExecStartedMsg>(p);
  (void)decodeMsg<ExitMsg>(p);
  (void)decodeMsg<SignalMsg>(p);
  (void)decodeMsg<ResizeMsg>(p);
  (void)decodeMsg<AttachMsg>(p);
  (void)decodeMsg<ProcListMsg>(p);
  (void)decodeMsg<ReadFileMsg>(p);
  (void)decodeMsg<WriteFileMsg>(p);
  (void)decodeMsg<StatMsg>(p);
  (void)decodeMsg<StatResultMsg>(p);
  (void)decodeMsg<ListMsg>(p);
  (void)decodeMsg<ListEntriesMsg>(p);
  (void)decodeMsg<MkdirMsg>(p);
  (void)decodeMsg<RemoveMsg>(p);
  (void)decodeMsg<RenameMsg>(p);
  (void)decodeMsg<WatchMsg>(p);
  (void)decodeMsg<WatchEventMsg>(p);
  (void)decodeMsg<WriteFileInPlaceMsg>(p);
  (void)decodeMsg<WatchTreeMsg>(p);
  (void)decodeMsg<SetXattrsMsg>(p);
  (void)decodeMsg<GetXattrsMsg>(p);
  (void)decodeMsg<XattrsResultMsg>(p);
  (void)decodeMsg<ConnectPortMsg>(p);
  (void)decodeMsg<PortConnectedMsg>(p);
  (void)decodeMsg<MountVolumeMsg>(p);
  (void)decodeMsg<QuiesceVolumesMsg>(p);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  // The whole input as one payload of every type.
  decodeAll(in);
  // The input as a byte stream, fed in pieces whose sizes the input picks.
  FrameDecoder dec;
  size_t pos = 0, step = 1;
  while (pos < in.size()) {
    size_t n = std::min(in.size() - pos, step);
    if (!dec.feed(in.substr(pos, n)).ok()) break;
    pos += n;
    step = step * 7 % 61 + 1;
    for (;;) {
      auto f = dec.next();
      if (!f.ok() || !f->has_value()) break;
      const Frame& fr = **f;
      if (fr.payload.size() > kMaxPayload) __builtin_trap();
      (void)validatePayload(fr.type, fr.payload);
    }
    // Buffered bytes never exceed one maximal frame plus the last piece.
    if (dec.buffered() > kHeaderSize + kMaxPayload + 64) __builtin_trap();
  }
  return 0;
}
