#pragma once
// The node's egress: one vessel-gateway process (a supervised child of
// vesseld, restarted when it dies), the control connection that drives it,
// and the pool of network slots whose taps sandbox VMs get. Sandboxes are
// registered with the gateway by their slot's source address and a policy;
// the registrations are kept here so a restarted gateway gets them back.
// Used from the io thread only. Every control call runs on a thread of its
// own (in order, one connection): a gateway that stalls (stopped, busy,
// wedged) holds the creates and deletes that wait for it for up to its 5 s
// timeout, never the io thread that serves every other request.
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/child_process.h"
#include "base/result.h"
#include "gateway/control_client.h"
#include "node/network/slot_pool.h"

namespace vessel::node::network {

struct EgressOptions {
  std::string gateway_binary = "vessel-gateway";
  std::string state_dir;  // the gateway's: its CA lives here; socket too
  // Where the gateway listens and the slots' gateway side lives. "": a
  // private namespace "<layout.prefix>-gw" made (and removed) here, so its
  // listeners and transit routes are not on the host and two vesselds on
  // one host do not collide.
  std::string gateway_netns;
  // --egress-upstream-netns: where the gateway resolves and dials. "": this
  // process's namespace.
  std::string upstream_netns;
  std::string resolver;   // --egress-resolver ("" = the gateway's default)
  std::string ca_bundle;  // --egress-ca-bundle ("" = the gateway's default)
  // Refused destination ranges passed to the gateway: by default the
  // networks this node is on (hostNetworks()), read when it starts.
  std::vector<std::string> deny_cidrs;
  std::string log_level = "info";
  NetworkLayout layout;
  size_t ready_slots = 2;
  std::chrono::milliseconds supervise_every{500};
};

class Egress {
 public:
  // Starts the gateway, waits for its control socket, reads its CA and
  // creates the slot pool (with the gateway namespace's table).
  static Result<std::unique_ptr<Egress>> start(boost::asio::io_context& io, EgressOptions opts);
  ~Egress();

  SlotPool& slots() { return *slots_; }
  // The per-deployment CA certificate (PEM) guests trust.
  const std::string& caPem() const { return ca_pem_; }

  // Registers (or replaces) a sandbox's policy; the policy object gets a
  // fresh, increasing generation. Open connections the new policy does not
  // allow are reset by the gateway before this completes.
  boost::asio::awaitable<Status> setSandbox(std::string sandbox, std::string source,
                                            boost::json::object policy);
  boost::asio::awaitable<Status> removeSandbox(std::string sandbox);
  // After a setSandbox that failed: the gateway may still carry it out
  // once it runs again (it reads what was queued on a connection that
  // timed out), and would then refuse the slot's address to the next
  // sandbox. A removal is queued behind it, not waited for; failures are
  // logged.
  void forget(const std::string& sandbox);
  // /metrics reads the gateway's counters over a connection of its own to
  // controlSocket() (vesseld::GatewayStats).
  const std::string& controlSocket() const { return socket_; }
  // For /healthz: running, pid, restarts, last error.
  boost::json::object health() const;
  bool healthy() const { return gateway_.running() && control_up_.load(); }
  // Stops supervising and terminates the gateway. Slots handed over
  // (SlotPool::handOver) stay, with the gateway namespace, for the next
  // vesseld.
  void stop();

 private:
  explicit Egress(boost::asio::io_context& io) : io_(io), timer_(io) {}
  Status spawn();
  // At start, before anything is served: spawns and waits (blocking) for
  // the control socket.
  Status spawnGateway();
  // A restart by the supervisor: the socket is waited for with a timer and
  // each attempt runs on the control thread.
  boost::asio::awaitable<Status> respawnGateway();
  boost::asio::awaitable<void> supervise();
  // On the control thread (or at start, before it has work).
  Status connectControl();
  Result<boost::json::object> callNow(const boost::json::object& req);
  // callNow on the control thread; the result comes back on the io thread.
  boost::asio::awaitable<Result<boost::json::object>> call(boost::json::object req);

  EgressOptions opts_;
  std::string socket_;
  ChildProcess gateway_;
  // The connection: used on control_thread_ only once start() returns.
  std::optional<gateway::ControlClient> control_;
  std::atomic<bool> control_up_{false};
  os::Netns private_gw_;
  std::unique_ptr<SlotPool> slots_;
  std::string ca_pem_;
  boost::asio::io_context& io_;
  boost::asio::steady_timer timer_;
  bool stopping_ = false;
  int restarts_ = 0;
  std::string last_error_;
  uint64_t generation_ = 0;
  struct Registration {
    std::string source;
    boost::json::object policy;
  };
  std::map<std::string, Registration> registered_;
  // Cleared by the destructor: a call or restart that resumes later finds
  // no Egress.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Where control calls run, one at a time in the order they were made.
  // Declared last: joined first.
  std::unique_ptr<boost::asio::thread_pool> control_thread_ =
      std::make_unique<boost::asio::thread_pool>(1);
};

}  // namespace vessel::node::network
