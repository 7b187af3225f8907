#pragma once
// File services: streamed read and atomic streamed write (never the whole
// file in memory), stat, list with depth, mkdir -p, remove, rename, and
// inotify watches. Failures are typed Errors on the stream.
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/channel.h"
#include "agent/poll_set.h"
#include "agentproto/messages.h"

namespace vessel::agent {

constexpr size_t kMaxListEntries = 100000;

// mkdir -p: every missing directory of the absolute `path` made with
// `mode`; an existing non-directory on the way is kAlreadyExists.
Status mkdirP(const std::string& path, mode_t mode);

class Files {
 public:
  explicit Files(Channel& ch) : ch_(ch) {}
  ~Files() { abortAll(); }

  // Requests that open a stream.
  void request(uint32_t stream, const agentproto::Frame& f);
  // FileData, FileEnd, Credit, Cancel on a file stream; false if not ours.
  bool onStreamFrame(uint32_t stream, const agentproto::Frame& f);
  // The host went away: close everything, remove half-written files.
  void abortAll();

  void poll(PollSet& ps);
  void pump();

 private:
  enum class Kind { kRead, kWrite, kList, kWatch };
  struct Op {
    Kind kind;
    int fd = -1;
    // Write: target and temporary path, mode and owner.
    std::string path, tmp;
    agentproto::WriteFileMsg write;
    // List: collected entries and the next one to send.
    std::vector<agentproto::ListEntry> entries;
    size_t next = 0;
    // Write: into the file itself (WriteFileInPlace), `created` by us.
    bool in_place = false, created = false;
    // Watch: tree watches map each inotify watch to its directory, relative
    // to the watched one ("" for itself).
    bool tree = false;
    std::string root;
    std::map<int, std::string> dirs;
  };

  void simple(uint32_t stream, const agentproto::Frame& f);
  void startRead(uint32_t stream, const agentproto::Frame& f);
  void startWrite(uint32_t stream, const agentproto::Frame& f);
  void startList(uint32_t stream, const agentproto::Frame& f);
  void startWatch(uint32_t stream, const agentproto::Frame& f);
  void startWriteInPlace(uint32_t stream, const agentproto::Frame& f);
  void startWatchTree(uint32_t stream, const agentproto::Frame& f);
  void finishWrite(uint32_t stream, Op& op);
  void readWatch(uint32_t stream, Op& op);
  void end(uint32_t stream, const Error* e);

  Channel& ch_;
  std::map<uint32_t, Op> ops_;
};

}  // namespace vessel::agent
