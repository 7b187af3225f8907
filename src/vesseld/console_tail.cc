#include "vesseld/console_tail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>

#include "base/fd.h"
#include "base/utf8.h"

namespace vessel::vesseld {

namespace json = boost::json;

// Bytes of 0x80 and above stay for UTF-8.
std::string printableLine(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    auto u = static_cast<unsigned char>(c);
    if (c == '\x1b') {
      if (i + 1 < in.size() && in[i + 1] == '[') {
        // CSI: parameters and intermediates up to a final byte in @..~.
        for (i += 2; i < in.size() && (in[i] < '@' || in[i] > '~'); ++i) {
        }
      } else {
        ++i;  // a two-byte sequence
      }
    } else if (c == '\t') {
      out += ' ';
    } else if (u >= 0x20 && u != 0x7f) {
      out += c;
    }
  }
  return toValidUtf8(out);
}

void ConsoleTail::line(const std::string& id, File& f, std::string_view text) {
  ops::SandboxLog* log = *log_;
  if (!log || f.lines > kMaxConsoleLines) return;
  bool cut = text.size() > kMaxConsoleLineBytes;
  std::string shown = printableLine(text.substr(0, kMaxConsoleLineBytes));
  if (shown.empty() && !cut) return;
  json::object o;
  if (f.lines == kMaxConsoleLines) {
    o["line"] = "[vessel: console lines past " + std::to_string(kMaxConsoleLines) +
                " are not logged; the node's console.log keeps them]";
    o["truncated"] = true;
  } else {
    o["line"] = std::move(shown);
    if (cut) o["truncated"] = true;
  }
  ++f.lines;
  log->append(id, ops::kLogConsole, std::move(o));
}

void ConsoleTail::skipTo(const std::string& id, const std::string& path) {
  struct stat st {};
  File& f = files_[id];
  if (::stat(path.c_str(), &st) == 0) f.offset = static_cast<uint64_t>(st.st_size);
}

void ConsoleTail::poll(const std::string& id, const std::string& path, bool last) {
  File& f = files_[id];
  auto fd = Fd::open(path, O_RDONLY);
  if (fd.ok()) {
    struct stat st {};
    uint64_t size = ::fstat(fd->get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    if (size < f.offset) {
      // Written again from the start (a new VM after a pause): read it anew.
      f = File{0, "", f.lines};
    }
    // Nothing new (most polls): no read at all.
    std::string buf(std::min<uint64_t>(size - f.offset, kMaxConsoleReadBytes), '\0');
    ssize_t n =
        buf.empty() ? 0 : ::pread(fd->get(), buf.data(), buf.size(), static_cast<off_t>(f.offset));
    if (n > 0) {
      f.offset += static_cast<uint64_t>(n);
      std::string_view got(buf.data(), static_cast<size_t>(n));
      for (size_t nl; (nl = got.find('\n')) != got.npos; got.remove_prefix(nl + 1)) {
        if (f.partial.empty()) {
          line(id, f, got.substr(0, nl));
        } else {
          f.partial.append(got.substr(0, nl));
          line(id, f, f.partial);
          f.partial.clear();
        }
      }
      // A line longer than the bound is logged cut, without waiting for its end.
      f.partial.append(got.substr(
          0, kMaxConsoleLineBytes + 1 - std::min(f.partial.size(), kMaxConsoleLineBytes + 1)));
    }
  }
  if (last) {
    if (!f.partial.empty()) line(id, f, f.partial);
    files_.erase(id);
  }
}

}  // namespace vessel::vesseld
