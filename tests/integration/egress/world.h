#pragma once
// EgressWorld: a fake internet, a real vessel-gateway and sandbox network
// slots, all in network namespaces this test process creates and removes
// (even when a test fails). Nothing leaves the machine: the only addresses
// are documentation ranges and .test names inside the "inet" namespace.
//
//   guest netns --veth-- slot netns (nftables) --veth-- gw netns (gateway listens,
//                                                        routes to inet)
//                                                gateway upstream: up netns -- inet
//
// The gw namespace routes to the fake internet on purpose: if the slot's
// rules let a packet through, it would reach the attacker and be logged.
#include <boost/json.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/child_process.h"
#include "base/fd.h"
#include "base/result.h"
#include "gateway/control_client.h"
#include "node/network/slot_pool.h"
#include "os/netns.h"

namespace vessel::egress_test {

inline constexpr const char* kA = "198.51.100.10";    // a.test, api.a.test
inline constexpr const char* kCdn = "198.51.100.20";  // a2.test and x2.test
inline constexpr const char* kX = "203.0.113.66";     // attacker
inline constexpr const char* kResolver = "192.0.2.53";
inline constexpr const char* kHold = "198.51.100.30";  // hold.test:7000 keeps connections

struct Guest {
  std::string sandbox;
  os::Netns netns;
  std::unique_ptr<node::network::Slot> slot;
};

class EgressWorld {
 public:
  // gateway_args: extra flags for vessel-gateway (e.g. a longer classify timeout).
  // start_gateway false: no gateway and no slots here; the test runs one
  // that is started by something else (vesseld) in gwNetns(), with
  // upNetns(), kResolver and testCa() as its --egress-* flags.
  // bulk: per-sandbox limits (slot and gateway) raised far out of the way,
  // for tests that measure thousands of flows from one sandbox.
  static Result<std::unique_ptr<EgressWorld>> create(std::vector<std::string> gateway_args = {},
                                                     bool start_gateway = true, bool bulk = false);
  ~EgressWorld();

  // A sandbox with its own slot and a namespace playing its root guest.
  Result<Guest*> addGuest(const std::string& sandbox, const boost::json::value& policy);
  Status setPolicy(const Guest& g, const boost::json::value& policy);
  // A sandbox whose guest is a VM: a tap slot (pass slot->tapFd() to
  // MachineSpec::tap_fd), registered with the gateway. No guest namespace.
  Result<Guest*> addVmGuest(const std::string& sandbox, const boost::json::value& policy);

  // Runs argv as root in the guest; returns stdout+stderr whatever the exit.
  std::string guestRun(const Guest& g, std::vector<std::string> argv,
                       std::chrono::seconds timeout = std::chrono::seconds(20));
  // Runs argv in any namespace of this world (by name).
  std::string runIn(const std::string& netns, std::vector<std::string> argv);
  // guest_tool.py subcommand.
  std::string guestTool(const Guest& g, std::vector<std::string> args);
  // curl in the guest trusting the test CA and the deployment CA.
  std::string curl(const Guest& g, std::vector<std::string> args);

  // Everything attacker-controlled endpoints received since the last clear,
  // read after in-flight packets have had a moment to land.
  std::string attackerLog();
  std::string apiLog();
  void clearLogs();

  gateway::ControlClient& control() { return *control_; }
  Result<boost::json::object> stats();
  // The gateway's counter `name` ("tcp_deny_bad-request"); 0 if absent, -1
  // if the gateway does not answer.
  int64_t counter(const std::string& name);
  // Waits for the gateway's verdict: until counter `name` exceeds `base`
  // (polling stats; gives up after `limit`). True if it did.
  bool waitForCounter(const std::string& name, int64_t base,
                      std::chrono::milliseconds limit = std::chrono::seconds(15));
  // The attacker's log without the settling pause: for use once the
  // gateway's verdict on the flow has been seen, so nothing is in flight.
  std::string attackerLogNow();
  const std::string& dir() const { return dir_; }
  const std::string& gwNetns() const { return gw_.name(); }
  pid_t gatewayPid() const { return gateway_.pid(); }
  std::string guestTrust() const { return dir_ + "/guest-trust.crt"; }
  std::string testCa() const { return dir_ + "/ca.crt"; }
  std::string gatewayLog() const;
  // A socket created inside the guest's namespace, for the test to drive.
  Result<Fd> guestSocket(const Guest& g, int type);
  Result<Fd> socketIn(const std::string& netns_path, int type);
  // The gateway's upstream namespace: the direct path to the fake internet.
  std::string upNetnsPath() const { return up_.path(); }
  const std::string& upNetns() const { return up_.name(); }

 private:
  EgressWorld() = default;
  Status buildNetwork();
  Status makeCertificates();
  Status startFakeInternet();
  Status startGateway();

  std::vector<std::string> gateway_args_;
  bool bulk_ = false;
  std::string prefix_;
  std::string dir_;
  os::Netns inet_, gw_, up_;
  ChildProcess internet_, gateway_;
  std::optional<gateway::ControlClient> control_;
  std::unique_ptr<node::network::SlotPool> pool_;
  std::vector<std::unique_ptr<Guest>> guests_;
};

// {"generation": g, "mode": "allowlist", "allow": [...]} and friends.
boost::json::value allowlist(uint64_t generation, std::vector<std::string> names);
boost::json::value fullMode(uint64_t generation);
boost::json::value noneMode(uint64_t generation);

}  // namespace vessel::egress_test
