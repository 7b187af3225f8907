#pragma once
// Volumes in the guest (docs/agent-protocol.md, MountVolume): each mount is
// a FUSE session whose server is on the host. The agent opens /dev/fuse,
// mounts it at the asked path and relays the session over its stream,
// one FUSE message per frame: what the guest's kernel asks goes to the
// host as VolumeData, what the host answers is written back. The agent
// parses none of it; the host's file server does, confined (see
// docs/design.md, "Volumes").
#include <cstdint>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "agent/channel.h"
#include "agent/poll_set.h"
#include "agentproto/messages.h"

namespace vessel::agent {

// Volumes mounted at once; a host asking for more gets an Error.
constexpr size_t kMaxVolumeMounts = 64;

class Volumes {
 public:
  explicit Volumes(Channel& ch) : ch_(ch) {}
  ~Volumes() { abortAll(); }
  Volumes(const Volumes&) = delete;
  Volumes& operator=(const Volumes&) = delete;

  // MountVolume: a new session, or (kKeepSession) a detached one taken back.
  void request(uint32_t stream, const agentproto::Frame& f);
  // QuiesceVolumes: Ok now (kRelease) or once nothing is outstanding.
  void quiesce(uint32_t stream, const agentproto::Frame& f);
  // VolumeData, Credit, Cancel on a volume stream; false if not ours.
  bool onStreamFrame(uint32_t stream, const agentproto::Frame& f);
  // The host went away: every mount stays, detached, for a new host to take
  // back (agentproto::MountVolumeMsg); unclaimed ones end after the grace.
  void detachAll();
  // The agent stops: every mount, attached or not, is unmounted (its calls fail).
  void abortAll();
  void poll(PollSet& ps);

 private:
  struct Mount {
    int fd = -1;  // /dev/fuse
    std::string path;
    bool read_only = false;
    bool quiet = false;  // QuiesceVolumes: no new request is read
    // Requests relayed whose answer has not been written back (FUSE unique
    // ids; FORGET, BATCH_FORGET and INTERRUPT have no answer).
    std::unordered_set<uint64_t> outstanding;
    int64_t detached_at_ms = 0;  // CLOCK_MONOTONIC, once detached
  };
  void onReadable(uint32_t stream, Mount& m);
  // Unmounts (lazily) and ends the stream.
  void end(uint32_t stream, const Error* e);
  // A detached mount at `path` taken back on `stream` (VolumeKept), if it
  // can be: same access, nothing outstanding. Else it is aborted.
  bool takeBack(uint32_t stream, const std::string& path, bool read_only, bool keep);
  // Answers the QuiesceVolumes waiting, once no mount has a request out.
  void answerQuiesced();

  Channel& ch_;
  std::map<uint32_t, Mount> mounts_;
  std::map<std::string, Mount> detached_;  // by path
  std::vector<uint32_t> quiesce_waiters_;
};

}  // namespace vessel::agent
