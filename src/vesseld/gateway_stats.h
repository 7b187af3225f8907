#pragma once
// The gateway's counters for GET /metrics, read off the io thread.
//
// /metrics is unauthenticated, so a scrape must never hold the io thread:
// the read ("stats" on the gateway's control socket, a blocking call) runs
// on a worker thread of its own over a connection of its own, at most one
// at a time. A scrape waits for it a short while (Options::wait) and then
// renders what it has: the last counters read, marked stale
// (vessel_gateway_stats_stale 1, and their age) when the gateway has not
// answered in time. Any number of scrapers cost one read in flight.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "metrics/registry.h"

namespace vessel::vesseld {

class GatewayStats {
 public:
  struct Options {
    std::string control_socket;  // the gateway's (Egress::controlSocket())
    // How long a scrape waits for a read in flight before rendering what
    // it has: well within a scraper's timeout (Prometheus: 10 s), and long
    // enough for a busy gateway on a loaded host to answer. Only that
    // scrape waits; the io thread serves on.
    std::chrono::milliseconds wait{2000};
    // Counters younger than this are served without asking again.
    std::chrono::milliseconds max_age{1000};
    // The worker's bound on connect, send and each read.
    std::chrono::milliseconds call_timeout{5000};
  };
  GatewayStats(boost::asio::io_context& io, Options opts);
  // Waits for a read in flight (at most call_timeout).
  ~GatewayStats();
  GatewayStats(const GatewayStats&) = delete;
  GatewayStats& operator=(const GatewayStats&) = delete;

  // On the io thread, before rendering: starts a read if the counters are
  // older than max_age and none is in flight, and waits for the one in
  // flight up to Options::wait. Never waits longer.
  boost::asio::awaitable<void> refresh();
  // vessel_gateway_up, the counters last read (if any), their age and
  // whether they are stale.
  void write(metrics::SampleWriter& w, bool gateway_up) const;

  // Reads started (tests: one in flight at a time).
  uint64_t readsStarted() const;

 private:
  struct State;
  void startRead();
  boost::asio::io_context& io_;
  Options opts_;
  std::shared_ptr<State> state_;
  boost::asio::thread_pool worker_{1};
};

// The gateway's "stats" reply as metric families: "tcp_deny_policy" becomes
// vessel_gateway_events_total{kind="tcp",verdict="deny",reason="policy"}.
void writeGatewayCounters(const boost::json::object& stats, metrics::SampleWriter& w);

}  // namespace vessel::vesseld
