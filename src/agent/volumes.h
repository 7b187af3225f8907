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

  // MountVolume.
  void request(uint32_t stream, const agentproto::Frame& f);
  // VolumeData, Credit, Cancel on a volume stream; false if not ours.
  bool onStreamFrame(uint32_t stream, const agentproto::Frame& f);
  // The host went away: every mount is detached (its calls fail).
  void abortAll();
  void poll(PollSet& ps);

 private:
  struct Mount {
    int fd = -1;  // /dev/fuse
    std::string path;
  };
  void onReadable(uint32_t stream, Mount& m);
  // Unmounts (lazily) and ends the stream.
  void end(uint32_t stream, const Error* e);

  Channel& ch_;
  std::map<uint32_t, Mount> mounts_;
};

}  // namespace vessel::agent
