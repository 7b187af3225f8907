#pragma once
// ConsoleLog drains a guest console socket (or QEMU's stderr) into a file
// capped at a size: the guest may print without end, and a full host disk
// is not its to cause.
// Past the cap one marker line is written and the rest is read and dropped,
// so the guest is never blocked on its console either.
#include <boost/asio/local/stream_protocol.hpp>
#include <memory>
#include <string>

#include "base/fd.h"
#include "base/result.h"

namespace vessel::hypervisor::qemu {

class ConsoleLog : public std::enable_shared_from_this<ConsoleLog> {
 public:
  using Socket = boost::asio::local::stream_protocol::socket;
  // `append`: continue a log an earlier process wrote (re-adoption after a
  // restart); what is already there counts against max_bytes.
  static Result<std::shared_ptr<ConsoleLog>> start(Socket socket, const std::string& path,
                                                   uint64_t max_bytes, bool append = false);
  ConsoleLog(Socket socket, Fd file, uint64_t max_bytes)
      : socket_(std::move(socket)), file_(std::move(file)), max_(max_bytes) {}
  void close();
  // Sends bytes to the guest console (blocking; small debug input only).
  Status send(std::string_view bytes);
  // Takes what the socket holds now into the file, without waiting: for a
  // caller about to read the file while the event loop is not running.
  void drainNow();
  uint64_t written() const { return written_; }
  bool truncated() const { return truncated_; }

 private:
  void readMore();
  void keep(size_t n);
  Socket socket_;
  Fd file_;
  uint64_t max_;
  uint64_t written_ = 0;
  bool truncated_ = false;
  char buf_[4096];
};

}  // namespace vessel::hypervisor::qemu
