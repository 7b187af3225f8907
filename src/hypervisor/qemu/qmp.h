#pragma once
// QMP client: QEMU's JSON control protocol over a unix socket. QEMU is a
// host process, but it relays state a guest influences and can die at any
// moment, so every line is parsed with bounds, a closed or garbled socket
// fails all waiting commands with an Error, and every command has a timeout.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"

namespace vessel::hypervisor::qemu {

namespace asio = boost::asio;
namespace json = boost::json;
using Socket = asio::local::stream_protocol::socket;
using Clock = std::chrono::steady_clock;

// One line longer than this is garbage, not a message.
constexpr size_t kMaxQmpLine = 1 << 20;

struct QmpMessage {
  enum class Kind { kGreeting, kReturn, kError, kEvent };
  Kind kind = Kind::kEvent;
  std::optional<uint64_t> id;  // ids we send are integers
  json::value value;           // return value, event data or greeting body
  std::string event;           // event name
  std::string error_class;
  std::string error_desc;
};

// Parses one QMP line (without its newline). The fuzzed edge of this module.
Result<QmpMessage> parseQmpMessage(std::string_view line);

class QmpClient : public std::enable_shared_from_this<QmpClient> {
 public:
  using EventHandler = std::function<void(const std::string& name, const json::value& data)>;

  // Takes a connected socket, reads the greeting and negotiates capabilities.
  static asio::awaitable<Result<std::shared_ptr<QmpClient>>> handshake(Socket socket,
                                                                       Clock::time_point deadline);

  // Runs one command. Fails with kDeadlineExceeded after `timeout`, with
  // kUnavailable if the socket closes, with kFailedPrecondition carrying
  // QEMU's error class and description if QEMU refuses the command.
  asio::awaitable<Result<json::value>> execute(
      std::string command, json::object args = {},
      std::chrono::milliseconds timeout = std::chrono::seconds(5));

  void onEvent(EventHandler h) { on_event_ = std::move(h); }
  // Closes the socket; waiting commands fail.
  void close();
  bool failed() const { return failed_.has_value(); }

  explicit QmpClient(Socket socket);

 private:
  struct Pending {
    explicit Pending(const asio::any_io_executor& ex) : timer(ex) {}
    std::optional<Result<json::value>> result;
    asio::steady_timer timer;
  };

  asio::awaitable<void> readLoop();
  asio::awaitable<void> writeLoop();
  void dispatch(QmpMessage msg);
  void failAll(const Error& e);
  asio::awaitable<Result<json::value>> await(std::shared_ptr<Pending> p, Clock::time_point deadline,
                                             const std::string& what);

  Socket socket_;
  std::string rbuf_;
  std::deque<std::string> outq_;
  bool writing_ = false;
  uint64_t next_id_ = 1;
  std::shared_ptr<Pending> greeting_;
  std::map<uint64_t, std::shared_ptr<Pending>> pending_;
  std::optional<Error> failed_;
  EventHandler on_event_;
};

}  // namespace vessel::hypervisor::qemu
