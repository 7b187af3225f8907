#include "hypervisor/qemu/console.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/write.hpp>

namespace vessel::hypervisor::qemu {

Result<std::shared_ptr<ConsoleLog>> ConsoleLog::start(Socket socket, const std::string& path,
                                                      uint64_t max_bytes, bool append) {
  VESSEL_ASSIGN_OR_RETURN(
      Fd f, Fd::open(path, O_WRONLY | O_CREAT | O_APPEND | (append ? 0 : O_TRUNC), 0600));
  auto c = std::make_shared<ConsoleLog>(std::move(socket), std::move(f), max_bytes);
  if (append) {
    off_t end = ::lseek(c->file_.get(), 0, SEEK_END);
    c->written_ = end > 0 ? static_cast<uint64_t>(end) : 0;
    c->truncated_ = c->written_ >= max_bytes;
  }
  c->readMore();
  return c;
}

void ConsoleLog::readMore() {
  socket_.async_read_some(boost::asio::buffer(buf_),
                          [self = shared_from_this()](auto ec, size_t n) {
                            if (ec) return;  // closed: the machine stopped
                            self->keep(n);
                            self->readMore();
                          });
}

void ConsoleLog::keep(size_t n) {
  size_t keep = 0;
  if (written_ < max_) keep = static_cast<size_t>(std::min<uint64_t>(n, max_ - written_));
  if (keep > 0) {
    // A short write to a local file only loses log text; not worth a retry loop.
    (void)!::write(file_.get(), buf_, keep);
    written_ += keep;
  }
  if (keep < n && !truncated_) {
    truncated_ = true;
    static const char kMarker[] = "\n[vessel: console log truncated here]\n";
    (void)!::write(file_.get(), kMarker, sizeof kMarker - 1);
  }
}

void ConsoleLog::drainNow() {
  if (!socket_.is_open()) return;
  // Bounded: at most the cap's worth plus one buffer is taken here.
  for (uint64_t taken = 0; taken <= max_;) {
    ssize_t n = ::recv(socket_.native_handle(), buf_, sizeof buf_, MSG_DONTWAIT);
    if (n <= 0) return;
    keep(static_cast<size_t>(n));
    taken += static_cast<uint64_t>(n);
  }
}

Status ConsoleLog::send(std::string_view bytes) {
  boost::system::error_code ec;
  boost::asio::write(socket_, boost::asio::buffer(bytes.data(), bytes.size()), ec);
  if (ec) return Error(Code::kUnavailable, "console write: " + ec.message());
  return okStatus();
}

void ConsoleLog::close() {
  boost::system::error_code ec;
  socket_.close(ec);
}

}  // namespace vessel::hypervisor::qemu
