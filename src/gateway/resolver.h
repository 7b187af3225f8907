#pragma once
// The gateway's own stub resolver: asks the trusted upstream resolver
// (--egress-resolver) for A records and caches answers for their TTL. It is
// the only source of addresses the gateway dials; nothing the guest says
// about addresses is ever used. Its sockets are created on the gateway
// thread, so they live in the upstream network namespace.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/result.h"
#include "gateway/dns/message.h"

namespace vessel::gateway {

class Resolver {
 public:
  Resolver(boost::asio::io_context& io, boost::asio::ip::udp::endpoint upstream,
           std::chrono::milliseconds timeout)
      : io_(io), upstream_(upstream), timeout_(timeout), rng_(std::random_device{}()) {}

  // IPv4 addresses for `name` (normalized). Errors: kNotFound (NXDOMAIN or no
  // A records), kDeadlineExceeded, kUnavailable, kProtocol.
  boost::asio::awaitable<Result<std::vector<dns::Record>>> resolve(std::string name);

 private:
  boost::asio::awaitable<Result<dns::Answer>> queryOnce(const std::string& name);

  struct Cached {
    std::vector<dns::Record> records;
    std::chrono::steady_clock::time_point expires;
  };
  boost::asio::io_context& io_;
  boost::asio::ip::udp::endpoint upstream_;
  std::chrono::milliseconds timeout_;
  std::mt19937 rng_;
  std::map<std::string, Cached> cache_;
};

}  // namespace vessel::gateway
