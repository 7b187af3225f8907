#pragma once
// The gateway's view of sandboxes: which transit source address belongs to
// which sandbox, that sandbox's current policy, the connections it has open
// (so a policy change can reset the ones no longer allowed), and the
// flow/DNS decision log with its counters. Single-threaded: it lives on the
// gateway's io_context thread, like everything that touches it.
#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "gateway/policy/policy.h"

namespace vessel::gateway {

// One proxied connection as the registry sees it.
struct ConnHandle {
  std::string name;  // pinned, normalized ("" for flows dialled by address)
  uint16_t port = 0;
  bool terminated = false;  // TLS terminated (credential or inspect)
  // Resets both sides (RST); set by the connection, called on policy change.
  std::function<void()> reset;
  std::string credential;  // the injected header value ("" for none)
  // Last byte relayed either way (the idle sweep resets connections idle
  // past the gateway's relay timeout).
  std::chrono::steady_clock::time_point last_active = std::chrono::steady_clock::now();
  boost::asio::ip::address address;  // the address dialled
  bool by_address = false;           // to the guest's destination (address rule, full mode)
};

struct Sandbox {
  std::string id;
  boost::asio::ip::address source;  // transit address its flows arrive from
  policy::Policy policy;
  std::list<std::weak_ptr<ConnHandle>> conns;
};

struct FlowEvent {
  std::string_view kind;  // "tcp" or "dns"
  std::string_view sandbox;
  std::string_view name;
  std::string address;
  uint16_t port = 0;
  bool allowed = false;
  std::string_view reason;
};

// A decision as vesseld reads it back for the sandbox's log (control op
// "decisions"): what record() was told, numbered, with its wall time.
struct Decision {
  uint64_t seq = 0;
  int64_t at_ms = 0;
  std::string kind, sandbox, name, address;
  uint16_t port = 0;
  bool allowed = false;
  std::string reason;
};

class Registry {
 public:
  // Decisions kept for vesseld to read (the oldest go): vesseld reads every
  // second, so only a burst past this between two reads loses any, and the
  // reader sees the gap in the numbers.
  static constexpr size_t kMaxKeptDecisions = 4096;
  Registry() : log_("gateway") {}

  // Installs or replaces a sandbox's policy. A generation older than the one
  // held is refused (a delayed update must not undo a newer one). Open
  // connections the new policy does not allow are reset before this returns.
  Status setSandbox(const std::string& id, boost::asio::ip::address source, policy::Policy p);
  // Forgets a sandbox and resets all its connections.
  Status removeSandbox(const std::string& id);

  Sandbox* bySource(const boost::asio::ip::address& source);
  Sandbox* byId(const std::string& id);
  void track(Sandbox& sb, const std::shared_ptr<ConnHandle>& c);

  void record(const FlowEvent& e);
  // At most `limit` decisions numbered after `after`, oldest first.
  std::vector<Decision> decisionsAfter(uint64_t after, size_t limit) const;
  // The number of the newest decision (0: none yet).
  uint64_t lastDecision() const { return next_decision_ - 1; }
  const std::map<std::string, uint64_t>& counters() const { return counters_; }
  size_t liveConnections();
  // Resets connections with nothing relayed since `before`; returns how many.
  size_t resetIdle(std::chrono::steady_clock::time_point before);

 private:
  void enforce(Sandbox& sb);
  Logger log_;
  std::map<std::string, Sandbox> sandboxes_;
  std::map<boost::asio::ip::address, std::string> by_source_;
  std::map<std::string, uint64_t> counters_;
  std::deque<Decision> decisions_;
  uint64_t next_decision_ = 1;
  uint64_t tracked_ = 0;
};

}  // namespace vessel::gateway
