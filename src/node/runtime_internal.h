#pragma once
// What the files of node::Runtime share (runtime.cc: create, pause, resume,
// destroy and the pool; runtime_fork.cc; runtime_recovery.cc;
// guest_setup.cc). Not for use outside them.
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "hypervisor/hypervisor.h"

namespace vessel::node::internal {

// Where the egress CA goes in the guest.
inline constexpr const char* kGuestCaCert = "/etc/vessel/egress-ca.crt";
inline constexpr const char* kGuestCaBundle = "/etc/vessel/ca-bundle.crt";

// Sandbox and VM ids as the runtime accepts them in paths.
inline bool validId(const std::string& id) {
  if (id.empty() || id.size() > 48) return false;
  for (char c : id)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

// Records the time since the last mark as phase `name`.
class PhaseClock {
 public:
  explicit PhaseClock(std::vector<std::pair<std::string, double>>& out) : out_(out) {}
  void mark(const char* name) {
    auto now = hypervisor::Clock::now();
    out_.emplace_back(name, std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }

 private:
  std::vector<std::pair<std::string, double>>& out_;
  hypervisor::Clock::time_point last_ = hypervisor::Clock::now();
};

}  // namespace vessel::node::internal
