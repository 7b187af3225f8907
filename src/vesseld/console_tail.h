#pragma once
// The console kind of a sandbox's log (ops/sandbox_log.h, docs/logs.md):
// the guest's console (kernel and agent messages), which the node already
// keeps in each VM's console.log (hypervisor::MachineSpec::console_log,
// itself capped), read from where it was left and written as entries of
// kind "console", one per line.
//
// Bounded: a line is cut at kMaxConsoleLineBytes; one VM gives at most
// kMaxConsoleLines entries, then one entry saying the rest is left out; a
// read takes at most kMaxConsoleReadBytes. The text is made valid UTF-8
// and its control bytes (escape sequences' ESC among them) are dropped.
// Used from the io thread.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "ops/sandbox_log.h"

namespace vessel::vesseld {

constexpr size_t kMaxConsoleLineBytes = 512;
constexpr int kMaxConsoleLines = 256;
constexpr size_t kMaxConsoleReadBytes = 64 << 10;

// Printable text only, as valid UTF-8: an escape sequence (a colour's
// "ESC [ 32 m") goes whole, tabs become spaces, other control bytes (CR,
// BEL) go. For the console's lines and the start command's.
std::string printableLine(std::string_view in);

class ConsoleTail {
 public:
  // Writes to the log `log` names while it lives (SandboxLog::handle()).
  explicit ConsoleTail(std::shared_ptr<ops::SandboxLog*> log) : log_(std::move(log)) {}

  // Logs the whole lines `path` (the VM's console.log) gained since the
  // last call for `id`. `last`: its VM is about to stop, so a line without
  // its newline is logged too, and `id` is forgotten.
  void poll(const std::string& id, const std::string& path, bool last = false);
  // A new VM for `id` (create, resume, fork, adopt): its console.log starts
  // again, and so do its bounds.
  void restart(const std::string& id) { files_.erase(id); }
  // A VM taken over from an earlier vesseld (adopt): only what `path`
  // gains from now on is new.
  void skipTo(const std::string& id, const std::string& path);

 private:
  struct File {
    uint64_t offset = 0;  // bytes of console.log read so far
    std::string partial;  // a line not ended yet
    int lines = 0;        // entries written for this VM
  };
  void line(const std::string& id, File& f, std::string_view text);

  std::shared_ptr<ops::SandboxLog*> log_;
  std::map<std::string, File> files_;
};

}  // namespace vessel::vesseld
