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
#include "gateway/dns/cache.h"
#include "gateway/dns/message.h"

namespace vessel::gateway {

class Resolver {
 public:
  Resolver(boost::asio::io_context& io, boost::asio::ip::udp::endpoint upstream,
           std::chrono::milliseconds timeout)
      : io_(io), upstream_(upstream), timeout_(timeout), rng_(std::random_device{}()) {}

  // IPv4 addresses for `name` (normalized), for sandbox `owner` (whose share
  // of the cache a miss fills). Errors: kNotFound (NXDOMAIN or no A
  // records), kDeadlineExceeded, kUnavailable, kProtocol.
  boost::asio::awaitable<Result<std::vector<dns::Record>>> resolve(std::string name,
                                                                   std::string owner);

 private:
  boost::asio::awaitable<Result<dns::Answer>> queryOnce(const std::string& name);

  boost::asio::io_context& io_;
  boost::asio::ip::udp::endpoint upstream_;
  std::chrono::milliseconds timeout_;
  std::mt19937 rng_;
  // 4096 names, at most 512 per sandbox (dns/cache.h).
  dns::Cache cache_{4096, 512};
};

}  // namespace vessel::gateway
