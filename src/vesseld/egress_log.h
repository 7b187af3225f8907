#pragma once
// The egress kind of a sandbox's log (ops/sandbox_log.h, docs/logs.md):
// what vessel-gateway decided about each connection and lookup of a
// sandbox (name, port, verdict, reason). The gateway keeps its newest
// decisions, numbered (gateway::Registry::kMaxKeptDecisions); this reads
// those after the last one it read ("decisions" on the control socket)
// once a second, off the io thread on a worker of its own over a
// connection of its own (as GatewayStats does), and writes each to its
// sandbox's log on the io thread. Bounded: at most kMaxEgressPerRead
// entries per sandbox and read, then one saying how many more were left
// out. Nothing of a connection's bytes, and no credential: the gateway
// reports names, addresses, ports and reasons only.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "ops/sandbox_log.h"

namespace vessel::vesseld {

constexpr int kMaxEgressPerRead = 100;

class EgressLog {
 public:
  struct Options {
    std::string control_socket;  // the gateway's (Egress::controlSocket())
    std::chrono::milliseconds every{1000};
    std::chrono::milliseconds call_timeout{5000};
  };
  // Writes to the log `log` names while it lives (SandboxLog::handle()).
  EgressLog(boost::asio::io_context& io, Options opts, std::shared_ptr<ops::SandboxLog*> log);
  // Waits for a read in flight (at most call_timeout).
  ~EgressLog();
  EgressLog(const EgressLog&) = delete;
  EgressLog& operator=(const EgressLog&) = delete;

  // Writes the decisions of a "decisions" reply to their sandboxes' logs
  // and returns the number to read after next time.
  static uint64_t take(const boost::json::object& reply, uint64_t after, ops::SandboxLog& log);

 private:
  boost::asio::awaitable<void> loop();
  boost::asio::io_context& io_;
  Options opts_;
  std::shared_ptr<ops::SandboxLog*> log_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  boost::asio::thread_pool worker_{1};
};

}  // namespace vessel::vesseld
